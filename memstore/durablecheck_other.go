//go:build !unix

package memstore

import "os"

// lockFile cannot take bbolt's lock here: the file is not checked, since
// a file another process writes could look damaged.
func lockFile(*os.File) error { return errNoCheck }

func mapFile(*os.File, int64) ([]byte, func(), error) { return nil, nil, errNoCheck }
