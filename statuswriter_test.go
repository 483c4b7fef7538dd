package protect

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// fakeWriter is a server's writer: it records what reaches it. The
// optional interfaces come from the mixins below, so that every
// combination can be built.
type fakeWriter struct {
	h        http.Header
	codes    []int    // WriteHeader calls, in order
	fields   []string // the RateLimit field at each WriteHeader
	body     strings.Builder
	flushes  int
	hijacks  int
	readFrom int
	deadline time.Time
}

func (f *fakeWriter) Header() http.Header { return f.h }
func (f *fakeWriter) Write(b []byte) (int, error) {
	return f.body.Write(b)
}
func (f *fakeWriter) WriteHeader(code int) {
	f.codes = append(f.codes, code)
	f.fields = append(f.fields, f.h.Get("RateLimit"))
}

// SetWriteDeadline is what http.ResponseController looks for, through
// Unwrap.
func (f *fakeWriter) SetWriteDeadline(t time.Time) error { f.deadline = t; return nil }

type flushMixin struct{ f *fakeWriter }

func (m flushMixin) Flush() { m.f.flushes++ }

type hijackMixin struct{ f *fakeWriter }

func (m hijackMixin) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	m.f.hijacks++
	return nil, nil, nil
}

type readMixin struct{ f *fakeWriter }

func (m readMixin) ReadFrom(src io.Reader) (int64, error) {
	m.f.readFrom++
	return io.Copy(&m.f.body, src)
}

// fake returns a writer with exactly the optional interfaces asked for.
func fake(f, h, r bool) (http.ResponseWriter, *fakeWriter) {
	b := &fakeWriter{h: http.Header{}}
	F, H, R := flushMixin{b}, hijackMixin{b}, readMixin{b}
	switch {
	case f && h && r:
		return struct {
			*fakeWriter
			flushMixin
			hijackMixin
			readMixin
		}{b, F, H, R}, b
	case f && h:
		return struct {
			*fakeWriter
			flushMixin
			hijackMixin
		}{b, F, H}, b
	case f && r:
		return struct {
			*fakeWriter
			flushMixin
			readMixin
		}{b, F, R}, b
	case h && r:
		return struct {
			*fakeWriter
			hijackMixin
			readMixin
		}{b, H, R}, b
	case f:
		return struct {
			*fakeWriter
			flushMixin
		}{b, F}, b
	case h:
		return struct {
			*fakeWriter
			hijackMixin
		}{b, H}, b
	case r:
		return struct {
			*fakeWriter
			readMixin
		}{b, R}, b
	}
	return b, b
}

// The wrapper has exactly the optional interfaces of the writer it wraps,
// each reaching that writer, and http.ResponseController reaches the
// writer's other methods through Unwrap.
func TestStatusWriterKeepsInterfaces(t *testing.T) {
	for i := range 8 {
		f, h, r := i&1 != 0, i&2 != 0, i&4 != 0
		t.Run(fmt.Sprintf("flusher=%v,hijacker=%v,readerfrom=%v", f, h, r), func(t *testing.T) {
			under, base := fake(f, h, r)
			w, st := newStatusWriter(under, outcome{})
			_, gotF := w.(http.Flusher)
			_, gotH := w.(http.Hijacker)
			_, gotR := w.(io.ReaderFrom)
			if gotF != f || gotH != h || gotR != r {
				t.Fatalf("newStatusWriter(…) is Flusher %v, Hijacker %v, ReaderFrom %v; want %v, %v, %v", gotF, gotH, gotR, f, h, r)
			}
			if u := w.(interface{ Unwrap() http.ResponseWriter }).Unwrap(); u != under {
				t.Fatalf("Unwrap() = %T, want the wrapped writer", u)
			}
			rc := http.NewResponseController(w)
			deadline := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
			if err := rc.SetWriteDeadline(deadline); err != nil || !base.deadline.Equal(deadline) {
				t.Fatalf("ResponseController.SetWriteDeadline(%v) = %v, the writer's deadline %v; want nil, %v", deadline, err, base.deadline, deadline)
			}
			if err := rc.SetReadDeadline(deadline); !errors.Is(err, http.ErrNotSupported) {
				t.Fatalf("ResponseController.SetReadDeadline, which no writer here has = %v, want ErrNotSupported", err)
			}
			err := rc.Flush()
			if f && (err != nil || base.flushes != 1) || !f && !errors.Is(err, http.ErrNotSupported) {
				t.Fatalf("ResponseController.Flush() = %v, %d flushes; want nil and 1 if the writer flushes, else ErrNotSupported", err, base.flushes)
			}
			if f {
				w.(http.Flusher).Flush()
				if base.flushes != 2 {
					t.Fatalf("Flush() reached the writer %d times, want 2", base.flushes)
				}
			}
			if _, _, err := rc.Hijack(); h && (err != nil || base.hijacks != 1 || !st.hijacked) || !h && !errors.Is(err, http.ErrNotSupported) {
				t.Fatalf("ResponseController.Hijack() = %v, %d hijacks, recorded %v; want nil, 1, true if the writer hijacks, else ErrNotSupported", err, base.hijacks, st.hijacked)
			}
			if r {
				n, err := w.(io.ReaderFrom).ReadFrom(strings.NewReader("body"))
				if err != nil || n != 4 || base.readFrom != 1 || base.body.String() != "body" {
					t.Fatalf("ReadFrom(body) = %d, %v, reaching the writer %d times with %q; want 4, nil, once, \"body\"", n, err, base.readFrom, base.body.String())
				}
			}
		})
	}
}

// What the wrapper takes as the status, and that it passes every call on.
func TestStatusWriterStatus(t *testing.T) {
	tests := []struct {
		name      string
		flusher   bool // the wrapped writer can flush
		do        func(w http.ResponseWriter)
		want      int   // the recorded status; 0: none (hijacked)
		wantCodes []int // the WriteHeader calls that reached the writer
	}{
		{name: "nothing written", do: func(http.ResponseWriter) {}, want: 200},
		{name: "body only", do: func(w http.ResponseWriter) { io.WriteString(w, "hi") }, want: 200},
		{name: "header then body", do: func(w http.ResponseWriter) { w.WriteHeader(404); io.WriteString(w, "no") }, want: 404, wantCodes: []int{404}},
		{name: "first WriteHeader wins", do: func(w http.ResponseWriter) { w.WriteHeader(401); w.WriteHeader(500) }, want: 401, wantCodes: []int{401, 500}},
		{name: "body, then a superfluous WriteHeader", do: func(w http.ResponseWriter) { io.WriteString(w, "x"); w.WriteHeader(401) }, want: 200, wantCodes: []int{401}},
		{name: "103 Early Hints is not the status", do: func(w http.ResponseWriter) { w.WriteHeader(103); w.WriteHeader(401) }, want: 401, wantCodes: []int{103, 401}},
		{name: "100 Continue, then a body", do: func(w http.ResponseWriter) { w.WriteHeader(100); io.WriteString(w, "x") }, want: 200, wantCodes: []int{100}},
		{name: "101 Switching Protocols is final", do: func(w http.ResponseWriter) { w.WriteHeader(101) }, want: 101, wantCodes: []int{101}},
		{name: "ReadFrom", do: func(w http.ResponseWriter) { w.(io.ReaderFrom).ReadFrom(strings.NewReader("x")) }, want: 200},
		{name: "Flush", flusher: true, do: func(w http.ResponseWriter) { w.(http.Flusher).Flush() }, want: 200},
		{name: "204 then Flush", flusher: true, do: func(w http.ResponseWriter) { w.WriteHeader(204); w.(http.Flusher).Flush() }, want: 204, wantCodes: []int{204}},
		{name: "a flush that cannot happen sends nothing", do: func(w http.ResponseWriter) {
			http.NewResponseController(w).Flush()
			w.WriteHeader(404)
		}, want: 404, wantCodes: []int{404}},
		{name: "hijacked", do: func(w http.ResponseWriter) { w.(http.Hijacker).Hijack() }, want: 0},
		{name: "hijacked, then a stray WriteHeader", do: func(w http.ResponseWriter) { w.(http.Hijacker).Hijack(); w.WriteHeader(401) }, want: 0, wantCodes: []int{401}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			under, base := fake(tt.flusher, true, true)
			var asked []int
			p, _ := newTestProtector(t, Config{})
			w, st := newStatusWriter(under, outcome{p: p, counts: func(s int) bool { asked = append(asked, s); return false }, r: request("192.0.2.1:1")})
			tt.do(w)
			st.done()
			if st.status != tt.want || fmt.Sprint(base.codes) != fmt.Sprint(tt.wantCodes) {
				t.Fatalf("status = %d, the writer got %v; want %d, %v", st.status, base.codes, tt.want, tt.wantCodes)
			}
			// CountStatus is asked once, about the final status; never
			// about a hijacked connection.
			if want := fmt.Sprint([]int{tt.want}); tt.want == 0 && len(asked) != 0 || tt.want != 0 && fmt.Sprint(asked) != want {
				t.Fatalf("CountStatus asked about %v, want %v", asked, want)
			}
		})
	}
}

// A failure is counted before its header reaches the server's writer,
// and the header carries the RateLimit field after the count.
func TestStatusWriterCountsBeforeTheHeader(t *testing.T) {
	p, _ := newTestProtector(t, Config{MaxRequests: 5, CountStatus: is401})
	k := p.agg.Key(netip.MustParseAddr("192.0.2.1"))
	for i, do := range []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { w.WriteHeader(401) },
		func(w http.ResponseWriter) { w.WriteHeader(103); w.WriteHeader(401) },
	} {
		under, base := fake(true, true, true)
		w, st := newStatusWriter(under, outcome{p: p, counts: is401, r: request("192.0.2.1:1")})
		do(w)
		st.done()
		last := len(base.fields) - 1
		if want := fmt.Sprintf(`"protect";r=%d;t=10`, 4-i); base.fields[last] != want {
			t.Fatalf("failure %d: RateLimit as the header left = %q, want %q", i+1, base.fields[last], want)
		}
	}
	if st, _ := p.inspect(t.Context(), k); st.Count != 2 {
		t.Fatalf("Inspect(192.0.2.1).Count = %d, want 2", st.Count)
	}
}

// One allocation per wrapped response.
func TestStatusWriterAllocs(t *testing.T) {
	for i := range 8 {
		under, _ := fake(i&1 != 0, i&2 != 0, i&4 != 0)
		o := outcome{counts: is401}
		if n := testing.AllocsPerRun(100, func() { newStatusWriter(under, o) }); n != 1 {
			t.Errorf("newStatusWriter(variant %d) allocates %v times, want 1", i, n)
		}
	}
}
