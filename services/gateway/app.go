package gateway

import (
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// contentSecurityPolicy lets the app load only its own files and talk only
// to its own origin: no inline script, no framing by other sites, nothing
// fetched from elsewhere.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// appHandler serves the web app's built files. A path that names no file
// is one of the app's own routes (/sessions/…), answered with index.html
// so a reload lands on the same page. Files under assets/ carry a content
// hash in their names and are cached for good; index.html is revalidated
// every time so a new build is picked up.
func appHandler(app fs.FS) http.Handler {
	files := http.FileServerFS(app)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" || isDir(app, name) || !exists(app, name) {
			h.Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, app, "index.html")
			return
		}
		if strings.HasPrefix(name, "assets/") {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		files.ServeHTTP(w, r)
	})
}

func exists(app fs.FS, name string) bool {
	_, err := fs.Stat(app, name)
	return !errors.Is(err, fs.ErrNotExist) && err == nil
}

func isDir(app fs.FS, name string) bool {
	fi, err := fs.Stat(app, name)
	return err == nil && fi.IsDir()
}
