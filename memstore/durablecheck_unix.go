//go:build unix

package memstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile takes f's lock as bbolt does (flock, exclusive), waiting at
// most lockWait, so that the check never reads a file another process
// is writing.
func lockFile(f *os.File) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("lock: %w", err)
		}
		if time.Now().After(deadline) {
			return errLocked
		}
		time.Sleep(lockWait / 10)
	}
}

// mapFile maps f's size bytes for reading; unmap releases them.
func mapFile(f *os.File, size int64) (data []byte, unmap func(), err error) {
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%d bytes: too large to map", size)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map: %w", err)
	}
	return data, func() { syscall.Munmap(data) }, nil
}
