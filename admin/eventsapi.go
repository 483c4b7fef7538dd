package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The pace of GET /v1/events as an event stream: how often the journal
// is read while nothing is new, and how often an idle stream says it is
// alive (a comment line), so that proxies on the way keep it open.
const (
	eventPoll      = time.Second
	eventHeartbeat = 15 * time.Second
	eventBatch     = 1000 // events read from the store at a time
)

// events serves GET /v1/events?since=CURSOR&limit=N: the journal's events
// after since as JSON lines (application/x-ndjson), at most limit
// (MaxEvents without it). Asked with Accept: text/event-stream it follows
// the journal instead, as server-sent events (id: the cursor, event: the
// kind, data: the EventRecord), from since or the Last-Event-ID a
// reconnecting client sends, until the client goes.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since := q.Get("since")
	limit := 0
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxEvents {
			writeError(w, h.log, "events", badf("limit %q: want a number from 1 to %d", s, MaxEvents))
			return
		}
		limit = n
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "events", err)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		if since == "" {
			since = r.Header.Get("Last-Event-ID")
		}
		h.followEvents(w, r, svc, since)
		return
	}
	recs, err := svc.Events(r.Context(), since, limit)
	if err != nil {
		writeError(w, h.log, "events", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for i := range recs {
		enc.Encode(&recs[i])
	}
}

// followEvents streams svc's events after since to w until r's client
// goes. The first read decides the status: an error in it is answered as
// a problem; one later ends the stream with an "error" event carrying the
// problem, for the stream's status is already sent.
func (h *handler) followEvents(w http.ResponseWriter, r *http.Request, svc *Service, since string) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	recs, err := svc.Events(ctx, since, eventBatch)
	if err != nil {
		writeError(w, h.log, "events", err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx would hold the stream back
	w.WriteHeader(http.StatusOK)
	// The status goes now, not with the first event: a client sees the
	// stream open at once, however quiet the journal.
	if rc.Flush() != nil {
		return
	}
	var buf bytes.Buffer
	var idle time.Duration // since the last write
	for {
		buf.Reset()
		for i := range recs {
			writeEvent(&buf, &recs[i])
			since = recs[i].Cursor
		}
		if len(recs) == 0 && idle >= eventHeartbeat {
			buf.WriteString(": alive\n\n")
		}
		if buf.Len() > 0 {
			idle = 0
			// The server's WriteTimeout counts from the request; a
			// stream pushes it on before each write (the wall clock, as
			// net/http's deadlines are).
			rc.SetWriteDeadline(time.Now().Add(eventHeartbeat + time.Minute))
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		if len(recs) < eventBatch { // the end of the journal, for now
			t := time.NewTimer(h.poll)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			idle += h.poll
		}
		recs, err = svc.Events(ctx, since, eventBatch)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			writeStreamError(w, h, err)
			return
		}
	}
}

// writeEvent writes one server-sent event of rec.
func writeEvent(buf *bytes.Buffer, rec *EventRecord) {
	data, _ := json.Marshal(rec) // an EventRecord always marshals
	fmt.Fprintf(buf, "id: %s\nevent: %s\ndata: %s\n\n", oneLine(rec.Cursor), oneLine(rec.Kind), data)
}

// oneLine keeps a field of an event on its line: a cursor or kind is
// the store's, and a line break in one would start a field of its own.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return s
}

// writeStreamError ends an event stream with an "error" event holding the
// problem writeError would answer with.
func writeStreamError(w http.ResponseWriter, h *handler, err error) {
	rec := &problemRecorder{h: http.Header{}}
	writeError(rec, h.log, "events", err)
	var p Problem
	if json.Unmarshal(rec.body.Bytes(), &p) != nil {
		return
	}
	if errors.Is(err, ErrCursorGone) {
		p.Detail += "; reconnect without since"
	}
	data, _ := json.Marshal(&p)
	fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
	http.NewResponseController(w).Flush()
}

// problemRecorder catches the problem writeError writes.
type problemRecorder struct {
	h    http.Header
	body bytes.Buffer
}

func (r *problemRecorder) Header() http.Header         { return r.h }
func (r *problemRecorder) WriteHeader(int)             {}
func (r *problemRecorder) Write(b []byte) (int, error) { return r.body.Write(b) }
