// Package newfile makes a file that must appear whole or not at all, and
// must never replace one another process made meanwhile: a new SQLite
// database, a key secret made on first use.
//
// os.WriteFile with O_EXCL gets the second but not the first: a crash, or
// a reader at the wrong moment, can find the name holding part of the
// bytes or none (an empty key secret, under which stored routes no longer
// open). Here the bytes go into a file of another name in the same
// directory, which is synced and then linked under the wanted name; a
// link, unlike a rename, fails when the name is taken.
package newfile

import (
	"crypto/rand"
	"os"
)

// Write makes path hold data with permissions perm (before the umask),
// unless something is there already, in which case it returns an error
// for which errors.Is(err, fs.ErrExist) holds and leaves path alone.
//
// The directory is not synced: until something syncs it, a crash may
// lose the new name (but never leave it holding less than data), and the
// caller makes the file again at its next start. A crash between the
// link and the removal of the other name leaves that name behind: path
// followed by ".new-" and a random suffix.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".new-" + rand.Text()
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Link(tmp, path)
}
