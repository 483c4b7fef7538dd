//go:build !linux

package nftsink

import (
	"context"
	"errors"

	"github.com/httpprotect/protect"
)

// A Sink keeps nftables sets; nftables is Linux's, so elsewhere Open
// fails.
type Sink struct{ opts Options }

// Result says what one Sync did.
type Result struct {
	Added, Deleted, Kept, Pending, Transactions int
	Read                                        bool
}

// ErrNotLinux is the error of Open outside Linux.
var ErrNotLinux = errors.New("nftsink: nftables exists only on Linux")

// Open fails outside Linux.
func Open(Options) (*Sink, error) { return nil, ErrNotLinux }

// Sync fails outside Linux.
func (*Sink) Sync(context.Context, []protect.Ban) (Result, error) { return Result{}, ErrNotLinux }

// Transactions is zero outside Linux.
func (*Sink) Transactions() int64 { return 0 }

// Close does nothing.
func (*Sink) Close() error { return nil }
