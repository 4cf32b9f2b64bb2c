// Command dist builds Penguin's release archives: penguin for linux,
// darwin and windows on amd64 and arm64, each stamped with the version,
// packed with the README and the licence as a .tar.gz (linux, darwin) or a .zip (windows), plus SHA256SUMS.
//
// The archives are reproducible: the same source and Go give the same
// bytes. The binaries are built with -trimpath and an empty build id; the
// archives list their files in a fixed order, with a fixed time, owner
// and mode, and gzip writes no name or time. It is written in Go rather
// than with tar and zip so that no tool's version or flags change the
// bytes.
//
//	go run ./deploy/dist -version v1.2.3 -out bin/dist
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// targets are the systems a release is built for.
var targets = []struct{ goos, goarch string }{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// docs are the files beside the binary in every archive; a release
// without one of them is not built.
var docs = []string{"README.md", "LICENSE"}

// stamp is the time every archive entry carries: the archives must not
// depend on when they were built.
var stamp = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	version := flag.String("version", "dev", "the version stamped into the binaries and the archive names")
	out := flag.String("out", "bin/dist", "the directory the archives and SHA256SUMS go to")
	goCmd := flag.String("go", "go", "the go command")
	flag.Parse()
	if err := run(*goCmd, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(goCmd, version, out string) error {
	if strings.ContainsAny(version, "/\\ \t\n'\"") || version == "" {
		return fmt.Errorf("version %q cannot name an archive", version)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "penguin-dist-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	var sums bytes.Buffer
	for _, t := range targets {
		exe := "penguin"
		if t.goos == "windows" {
			exe += ".exe"
		}
		bin := filepath.Join(work, t.goos+"-"+t.goarch, exe)
		build := exec.Command(goCmd, "build", "-trimpath", "-buildvcs=false",
			"-ldflags", "-s -w -buildid= -X main.version="+version, "-o", bin, "./cmd/penguin")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.goos, "GOARCH="+t.goarch)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building %s/%s: %w", t.goos, t.goarch, err)
		}
		dir := fmt.Sprintf("penguin-%s-%s-%s", version, t.goos, t.goarch)
		files := []file{{name: dir + "/" + exe, path: bin, mode: 0o755}}
		for _, d := range docs {
			if _, err := os.Stat(d); err != nil {
				return fmt.Errorf("%s belongs in every archive: %w", d, err)
			}
			files = append(files, file{name: dir + "/" + d, path: d, mode: 0o644})
		}
		name := dir + ".tar.gz"
		write := writeTarGz
		if t.goos == "windows" {
			name, write = dir+".zip", writeZip
		}
		var buf bytes.Buffer
		if err := write(&buf, files); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(out, name), buf.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256(buf.Bytes()), name)
	}
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), sums.Bytes(), 0o644)
}

// file is one entry of an archive: its name there, where it is read from,
// and its mode.
type file struct {
	name, path string
	mode       int64
}

// writeTarGz writes files, in order, as a gzip-compressed tar owned by
// root with the fixed time.
func writeTarGz(w io.Writer, files []file) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(data)), ModTime: stamp, Typeflag: tar.TypeReg, Uname: "root", Gname: "root", Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// writeZip writes files, in order, as a zip with the fixed time.
func writeZip(w io.Writer, files []file) error {
	zw := zip.NewWriter(w)
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: stamp}
		h.SetMode(os.FileMode(f.mode))
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if _, err := fw.Write(data); err != nil {
			return err
		}
	}
	return zw.Close()
}
