// Package webhook posts the events of a ban list's journal to a URL, as
// protectd's HTTP_PROTECT_WEBHOOK_URL does.
//
// A Sender follows the journal (admin.Events) from the moment it starts
// and posts what it reads in batches, each body a JSON object
//
//	{"events": [EventRecord, ...]}
//
// signed with the shared secret: X-Protect-Timestamp is when it was
// posted (Unix seconds), and X-Protect-Signature "sha256=" and the hex of
// the HMAC-SHA256 of the timestamp, a dot and the body. The receiver
// tells a post of protect's from a forged one by the signature (compared
// with hmac.Equal, as Verify does), and refuses a post replayed once
// MaxSkew has passed by the timestamp; within MaxSkew a copy is taken, so
// a receiver that must take each event once drops an event whose cursor
// it has applied. Delivery is at least once: each try of a post is signed anew,
// with the time it is sent, and a post whose answer was lost is sent
// again. A batch that fails (no answer, 429 or 5xx) is posted again after
// a backoff that doubles up to Options.MaxBackoff; one the receiver
// refuses (another 4xx, or a redirect, which is never followed) is
// dropped and counted, for sending it again would be refused again.
//
// Nothing waits for the receiver but the Sender: the journal is read
// into a bounded queue, and while the receiver is slow or down the
// oldest events queued beyond Options.Queue are dropped and counted
// (Stats.Dropped). A request is never held up by a webhook.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/follow"
	"github.com/httpprotect/protect/internal/redact"
)

// SignatureHeader carries the signature of a post's timestamp and body.
const SignatureHeader = "X-Protect-Signature"

// TimestampHeader carries when a post was signed, in Unix seconds.
const TimestampHeader = "X-Protect-Timestamp"

// MaxSkew is how far a post's timestamp may be from the receiver's clock
// for Verify to take it: far enough for clocks that drift apart and a
// slow network, near enough that a post captured and replayed later is
// refused.
const MaxSkew = 5 * time.Minute

// MinSecret is the shortest secret New accepts: a short one is a
// guessable one.
const MinSecret = 16

// Source is where a Sender reads events: an admin.Admin or admin.Service.
type Source = follow.Source

// Options configure a Sender. URL and Secret are required; the zero
// value of every other field is its default.
type Options struct {
	URL    string // http or https
	Secret []byte // at least MinSecret bytes

	// Client posts; nil is a client whose requests time out after 10s.
	Client *http.Client
	// Queue bounds the events read but not yet delivered [10,000].
	Queue int
	// Batch is the most events in one post [100].
	Batch int
	// Poll is how often the journal is read while nothing is new [1s].
	Poll time.Duration
	// MinBackoff and MaxBackoff bound the wait before a failed post is
	// tried again, doubling from the first to the second [1s, 1m].
	MinBackoff, MaxBackoff time.Duration
	// Logger logs failed posts and dropped events; nil logs nothing.
	Logger *slog.Logger
	// Wait waits d or until ctx is done, reporting whether d passed; nil
	// is a timer. Tests pass one that does not sleep.
	Wait func(ctx context.Context, d time.Duration) bool
	// Now is the clock posts are timestamped by; nil is time.Now.
	Now func() time.Time
}

// Stats counts what a Sender did.
type Stats struct {
	Delivered uint64 // events in posts the receiver took (2xx)
	Refused   uint64 // events in posts it refused (3xx, 4xx but 429), dropped
	Dropped   uint64 // events dropped from a full queue, never posted
	Retries   uint64 // posts tried again after a failure
	Lost      uint64 // journal reads that found their cursor trimmed away
}

// A Sender posts a journal's events to a webhook. Make one with New.
type Sender struct {
	o   Options
	log *slog.Logger
	q   *follow.Queue

	delivered, refused, retries atomic.Uint64
}

// New checks o and returns a Sender of it.
func New(o Options) (*Sender, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// A password in the URL is a secret too.
		return nil, fmt.Errorf("webhook: URL %q: want http://host/path or https://host/path", redact.URL(o.URL))
	}
	if len(o.Secret) < MinSecret {
		return nil, fmt.Errorf("webhook: the secret has %d bytes, want at least %d: a receiver tells protect's posts from forged ones by it", len(o.Secret), MinSecret)
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	// A redirect would turn the POST into a bodiless GET (301, 302, 303)
	// that reads as delivered, or send the signed body wherever the
	// receiver points (307, 308): a 3xx is answered as it is, refused.
	c := *o.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	o.Client = &c
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(time.Minute, o.MinBackoff)
	}
	if o.Wait == nil {
		o.Wait = follow.Wait
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := follow.New(follow.Options{Name: "webhook", Queue: o.Queue, Batch: o.Batch, Poll: o.Poll, Logger: log, Wait: o.Wait})
	return &Sender{o: o, log: log, q: q}, nil
}

// Stats returns the counts so far.
func (s *Sender) Stats() Stats {
	return Stats{Delivered: s.delivered.Load(), Refused: s.refused.Load(), Dropped: s.q.Dropped(),
		Retries: s.retries.Load(), Lost: s.q.Lost()}
}

// Start follows src's journal from its end, as it reads it before
// returning, and posts its events until ctx is done; done is closed then.
// What is queued when ctx is done is not posted. A source without a
// journal is admin.ErrNoJournal, and nothing is started.
func (s *Sender) Start(ctx context.Context, src Source) (done <-chan struct{}, err error) {
	return s.q.Start(ctx, src, s.post)
}

// post delivers queued batches until ctx is done.
func (s *Sender) post(ctx context.Context) {
	for {
		batch, ok := s.q.Next(ctx)
		if !ok {
			return
		}
		body, _ := json.Marshal(struct {
			Events []admin.EventRecord `json:"events"`
		}{batch}) // event records always marshal
		backoff := s.o.MinBackoff
		for {
			status, err := s.send(ctx, body)
			if err == nil && status/100 == 2 {
				s.delivered.Add(uint64(len(batch)))
				break
			}
			if err == nil && (status/100 == 4 && status != http.StatusTooManyRequests || status/100 == 3) {
				s.refused.Add(uint64(len(batch)))
				s.log.Warn("webhook: the receiver refused a post; its events are dropped", "status", status, "events", len(batch))
				break
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.log.Warn("webhook: post failed", "err", err.Error(), "retry_in", backoff.String())
			} else {
				s.log.Warn("webhook: post failed", "status", status, "retry_in", backoff.String())
			}
			if !s.o.Wait(ctx, backoff) {
				return
			}
			s.retries.Add(1)
			backoff = min(2*backoff, s.o.MaxBackoff)
		}
	}
}

// send posts body once and returns the status.
func (s *Sender) send(ctx context.Context, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "protect-webhook")
	ts := strconv.FormatInt(s.o.Now().Unix(), 10)
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(SignatureHeader, Sign(s.o.Secret, ts, body))
	res, err := s.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // so the connection is reused
	res.Body.Close()
	return res.StatusCode, nil
}

// Sign is the X-Protect-Signature of body posted at ts (the
// X-Protect-Timestamp, as sent) under secret: "sha256=" and the hex of
// the HMAC-SHA256 of ts, ".", and body.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is the signature of body posted at ts under
// secret, in time that does not depend on where they differ, and ts (Unix
// seconds, in decimal digits) is within MaxSkew of now.
func Verify(secret []byte, ts string, body []byte, sig string, now time.Time) bool {
	sec, err := strconv.ParseUint(ts, 10, 63) // digits alone, no sign, within int64
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(int64(sec), 0)); d > MaxSkew || d < -MaxSkew {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(Sign(secret, ts, body)))
}
