package store

// Store errors in words an operator can act on: the Protector's guard
// explains every store error it absorbs, and a store explains the errors
// of its own checks (a ping) the same way.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// storeError is a store error whose text says what happened in words an
// operator can act on ("connection refused at 127.0.0.1:6399"), where the
// client library's own text is often only its symptom ("context deadline
// exceeded"). It wraps the original, so errors.Is and errors.As still see
// context.DeadlineExceeded or the *net.OpError.
type storeError struct {
	msg string
	err error
}

func (e *storeError) Error() string { return e.msg }
func (e *storeError) Unwrap() error { return e.err }

// ExplainError rewrites the cause at the end of err's text when it
// is a network failure or a deadline; other errors are returned as they
// are. timeout is the deadline the call had. It runs on failures only.
func ExplainError(err error, timeout time.Duration) error {
	if err == nil {
		return nil
	}
	var se *storeError
	if errors.As(err, &se) {
		return err // explained already
	}
	var cause string
	var inner error
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		cause, inner = fmt.Sprintf("cannot resolve host %q", dns.Name), outermostNetError(err)
	case errors.As(err, &op):
		addr := "the store"
		if op.Addr != nil {
			addr = op.Addr.String()
		}
		inner = op
		switch {
		case errors.Is(op, syscall.ECONNREFUSED):
			cause = "connection refused at " + addr
		case op.Op == "dial" && op.Timeout():
			cause = fmt.Sprintf("connecting to %s timed out", addr)
		case op.Timeout():
			cause = fmt.Sprintf("%s did not answer within %v", addr, timeout)
		case errors.Is(op, syscall.ECONNRESET) || errors.Is(op, syscall.EPIPE):
			cause = "connection to " + addr + " lost"
		case op.Op == "dial":
			cause = fmt.Sprintf("cannot connect to %s: %v", addr, op.Err)
		default:
			return err
		}
	case errors.Is(err, context.DeadlineExceeded):
		cause, inner = fmt.Sprintf("timed out after %v (StoreTimeout)", timeout), context.DeadlineExceeded
	default:
		return err
	}
	msg := err.Error()
	if t := inner.Error(); strings.HasSuffix(msg, t) {
		msg = msg[:len(msg)-len(t)] + cause
	} else {
		msg += " (" + cause + ")"
	}
	return &storeError{msg: msg, err: err}
}

// outermostNetError returns the *net.OpError around a DNS error, whose
// text is the one at the end of err's, or the DNS error itself.
func outermostNetError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	var dns *net.DNSError
	errors.As(err, &dns)
	return dns
}
