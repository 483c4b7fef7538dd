package protect

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
)

// statusWriter passes a response through to the writer it wraps and
// records its final status, for Middleware to ask Config.CountStatus about.
// With an outcome to count, it counts a failure the moment the status is
// known, before the header leaves: the client cannot see its outcome (and
// hang up) before the failure is counted, and the RateLimit fields on the
// response are the ones after counting.
//
// A handler must not lose what the writer under it can do: streaming
// (http.Flusher), WebSockets (http.Hijacker), sendfile (io.ReaderFrom),
// and everything http.ResponseController reaches through Unwrap
// (deadlines, full duplex). A wrapper with a Flush method over a writer
// that cannot flush would lie to a handler that type-asserts, so
// newStatusWriter returns one of eight types: the statusWriter alone, or
// with exactly the optional methods the wrapped writer has.
type statusWriter struct {
	http.ResponseWriter
	status   int  // the final status; 0 until a header or body is written
	hijacked bool // the handler took the connection: there is no status
	out      outcome
}

// An outcome counts one failure of a request. The zero outcome counts
// nothing: the writer only records.
type outcome struct {
	p      *Protector
	counts func(status int) bool // Config.CountStatus
	r      *http.Request
}

// settle takes code as the response's final status: if it is a failure,
// it counts it, and writes the RateLimit fields of the count over the
// Check's, while the header can still change.
func (w *statusWriter) settle(code int) {
	w.status = code
	o := &w.out
	if o.p == nil || !o.counts(code) {
		return
	}
	// A client that hangs up must not escape the count; StoreTimeout
	// still bounds it.
	d, _ := o.p.penalize(context.WithoutCancel(o.r.Context()), o.r, 1)
	if d.Status != Unavailable { // a store that failed knows nothing to tell the client
		d.WriteHeaders(w.ResponseWriter.Header())
	}
}

// newStatusWriter wraps w, at one allocation, and returns the wrapper for
// the handler and its statusWriter for the middleware.
func newStatusWriter(w http.ResponseWriter, o outcome) (http.ResponseWriter, *statusWriter) {
	_, f := w.(http.Flusher)
	_, h := w.(http.Hijacker)
	_, r := w.(io.ReaderFrom)
	sw := statusWriter{ResponseWriter: w, out: o}
	switch {
	case f && h && r: // net/http's HTTP/1 writer
		x := &swFHR{sw}
		return x, &x.statusWriter
	case f && !h && !r: // HTTP/2, httptest.ResponseRecorder
		x := &swF{sw}
		return x, &x.statusWriter
	case f && h:
		x := &swFH{sw}
		return x, &x.statusWriter
	case f && r:
		x := &swFR{sw}
		return x, &x.statusWriter
	case h && r:
		x := &swHR{sw}
		return x, &x.statusWriter
	case h:
		x := &swH{sw}
		return x, &x.statusWriter
	case r:
		x := &swR{sw}
		return x, &x.statusWriter
	}
	x := &statusWriter{ResponseWriter: w, out: o} // not &sw: sw would escape on every path
	return x, x
}

// WriteHeader records the first final status and passes every call on.
// A 1xx other than 101 is informational (103 Early Hints, say): the final
// status is still to come, as net/http sees it. Later calls are passed on
// too, so that the wrapped writer reports them as superfluous.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && !w.hijacked && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		w.settle(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200 when the handler writes a body before any status, as
// net/http does.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 && !w.hijacked {
		w.settle(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// FlushError flushes through http.ResponseController, which finds the
// wrapped writer's FlushError or Flush (through its own Unwrap chain if
// need be) and reports http.ErrNotSupported when there is none. A flush
// sends the header, 200 unless one was written; that 200 is settled after
// the flush, because before it nobody knows whether the flush can happen
// at all (a failed flush sends nothing, and the handler may still write
// another status).
//
// Every variant has it, because ResponseController.Flush asks for
// FlushError before Flush, and an error is an honest answer.
func (w *statusWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if err == nil && w.status == 0 && !w.hijacked {
		w.settle(http.StatusOK)
	}
	return err
}

// done settles a response the handler returned from without writing
// anything: net/http then sends 200. A hijacked connection has no status
// and is never counted.
func (w *statusWriter) done() {
	if w.status == 0 && !w.hijacked {
		w.settle(http.StatusOK)
	}
}

// fail settles a response whose handler panicked before writing a
// status: 500, as net/http answers it.
func (w *statusWriter) fail() {
	if w.status == 0 && !w.hijacked {
		w.settle(http.StatusInternalServerError)
	}
}

func (w *statusWriter) flush() { w.FlushError() }

func (w *statusWriter) hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := w.ResponseWriter.(http.Hijacker).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

func (w *statusWriter) readFrom(src io.Reader) (int64, error) {
	// The wrapped ReadFrom writes 200 first unless a status was written.
	if w.status == 0 && !w.hijacked {
		w.settle(http.StatusOK)
	}
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(src)
}

// The variants: the statusWriter with the optional methods of the writer
// it wraps. F is http.Flusher, H http.Hijacker, R io.ReaderFrom.
type (
	swF   struct{ statusWriter }
	swH   struct{ statusWriter }
	swR   struct{ statusWriter }
	swFH  struct{ statusWriter }
	swFR  struct{ statusWriter }
	swHR  struct{ statusWriter }
	swFHR struct{ statusWriter }
)

func (w *swF) Flush()   { w.flush() }
func (w *swFH) Flush()  { w.flush() }
func (w *swFR) Flush()  { w.flush() }
func (w *swFHR) Flush() { w.flush() }

func (w *swH) Hijack() (net.Conn, *bufio.ReadWriter, error)   { return w.hijack() }
func (w *swFH) Hijack() (net.Conn, *bufio.ReadWriter, error)  { return w.hijack() }
func (w *swHR) Hijack() (net.Conn, *bufio.ReadWriter, error)  { return w.hijack() }
func (w *swFHR) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

func (w *swR) ReadFrom(src io.Reader) (int64, error)   { return w.readFrom(src) }
func (w *swFR) ReadFrom(src io.Reader) (int64, error)  { return w.readFrom(src) }
func (w *swHR) ReadFrom(src io.Reader) (int64, error)  { return w.readFrom(src) }
func (w *swFHR) ReadFrom(src io.Reader) (int64, error) { return w.readFrom(src) }
