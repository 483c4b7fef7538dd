package protect

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/httpprotect/protect/challenge"
)

// ChallengeConfig turns on the proof-of-work challenge (Config.Challenge;
// nil: off): a stream past After and within BanLimit is Challenged, not
// Limited, unless it holds a valid pass, and is still counted. Failed
// answers count toward BanLimit. The repository's docs/challenge.md has
// the whole model.
type ChallengeConfig struct {
	After      int64         // at least MaxRequests, below BanLimit [MaxRequests]
	Secret     []byte        // the HMAC key, 16 bytes or more; give every instance the same [random, logged]
	Difficulty int           // leading zero bits of SHA-256(nonce || answer) [challenge.DefaultDifficulty]
	PassTTL    time.Duration // how long a pass lasts [1h]
	NonceTTL   time.Duration // how long a nonce may be answered [5m]
	Path       string        // where the page posts its answer ["/.protect/challenge"]
}

// challengeDefaults checks and completes Config.Challenge, of the
// complete limits. It copies the ChallengeConfig, so that the caller's
// is never written.
func (c *Config) challengeDefaults() []error {
	if c.Challenge == nil {
		return nil
	}
	cc := *c.Challenge
	cc.Secret = append([]byte(nil), cc.Secret...)
	if len(c.Challenge.Secret) == 0 {
		cc.Secret = nil
	}
	c.Challenge = &cc
	var errs []error
	if cc.After == 0 {
		cc.After = c.MaxRequests
	}
	switch {
	case cc.After < c.MaxRequests:
		errs = append(errs, fieldErr("Challenge.After", cc.After, "below MaxRequests %d: want MaxRequests to BanLimit-1", c.MaxRequests))
	case c.BanLimit >= 0 && cc.After >= c.BanLimit:
		errs = append(errs, fieldErr("Challenge.After", cc.After, "at or past BanLimit %d: nobody would be challenged", c.BanLimit))
	}
	if cc.Secret != nil && len(cc.Secret) < 16 {
		errs = append(errs, fieldErr("Challenge.Secret", nil, "%d bytes: want at least 16, such as the output of openssl rand -hex 32", len(cc.Secret)))
	}
	if cc.Difficulty == 0 {
		cc.Difficulty = challenge.DefaultDifficulty
	}
	if cc.Difficulty < 1 || cc.Difficulty > challenge.MaxDifficulty {
		errs = append(errs, fieldErr("Challenge.Difficulty", cc.Difficulty, "want 1 to %d", challenge.MaxDifficulty))
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Challenge.PassTTL", &cc.PassTTL, challenge.DefaultPassTTL},
		{"Challenge.NonceTTL", &cc.NonceTTL, challenge.DefaultNonceTTL},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < time.Second || *d.v > MaxDuration {
			errs = append(errs, fieldErr(d.name, *d.v, "want 1s to %v", MaxDuration))
		}
	}
	if cc.Path == "" {
		cc.Path = challenge.DefaultPath
	}
	if !strings.HasPrefix(cc.Path, "/") || strings.ContainsAny(cc.Path, "?# \t\r\n") {
		errs = append(errs, fieldErr("Challenge.Path", strconv.Quote(cc.Path), "want an absolute path, such as %q", challenge.DefaultPath))
	}
	if c.Plan != nil {
		errs = append(errs, fieldErr("Challenge", nil, "Plan replaces the stream limit, and the challenge is a step of it: set one of Plan and Challenge"))
	}
	return errs
}

// challenger is a protector's challenge: nil when Config.Challenge is.
type challenger struct {
	c     *challenge.Challenger
	after int64
	path  string
	clock func() time.Time
}

// newChallenger makes the challenger of the complete c.
func newChallenger(c *Config) (*challenger, error) {
	cc := c.Challenge
	if cc == nil {
		for _, l := range c.BlockLists {
			if l.Challenge { // documented, and easy to miss: say so at start
				c.Logger.LogAttrs(context.Background(), slog.LevelWarn,
					"protect: block list marked to challenge, but Config.Challenge is off: its entries are blocked",
					slog.String("list", l.Name), slog.String("namespace", c.Namespace))
			}
		}
		return nil, nil
	}
	ch, generated, err := challenge.New(challenge.Config{
		Secret: cc.Secret, Difficulty: cc.Difficulty, NonceTTL: cc.NonceTTL, PassTTL: cc.PassTTL, Clock: c.Clock,
	})
	if err != nil {
		return nil, err
	}
	if generated {
		c.Logger.LogAttrs(context.Background(), slog.LevelWarn,
			"protect: challenge: no Secret given, made a random one: passes end with this process and other instances refuse them",
			slog.String("namespace", c.Namespace))
	}
	return &challenger{c: ch, after: cc.After, path: cc.Path, clock: c.Clock}, nil
}

// challengeKey is the key d's challenge is bound to: its nonce, its
// answer and its pass. It is the key counted (an address's, or KeyFunc's)
// but under ConsumerFunc, whose consumer the answer path cannot know (a
// proxy sends the answer without the gateway's consumer headers, and a
// client could name any consumer there): then it is the address's.
func (p *Protector) challengeKey(d *Decision) Key {
	if p.cfg.ConsumerFunc != nil && d.Addr.IsValid() {
		return p.agg.Key(d.Addr)
	}
	return d.Key
}

// passed decides d, Challenged, again from r's pass cookie: a valid pass
// for d's challenge key makes it Allowed; a genuine pass of another key
// counts one failure, and d is what the challenge key's stream then is.
//
//go:noinline
func (p *Protector) passed(ctx context.Context, r *http.Request, d *Decision) {
	ck, err := r.Cookie(challenge.CookieName)
	if err != nil {
		return
	}
	switch err := p.chal.c.CheckPass(p.challengeKey(d).String(), ck.Value); {
	case err == nil:
		d.Status, d.RetryAfter = Allowed, 0
	case errors.Is(err, challenge.ErrKey): // a pass carried from another client
		p.failed(ctx, d, p.challengeKey(d), d.Addr, d.Ban)
	}
}

// failed counts one failure of the challenge for key k of address a
// (a pass or an answer of another key, a wrong answer) and writes into d
// what k's stream then is; ban is the entry of a list marked to challenge
// that holds a, nil for none.
func (p *Protector) failed(ctx context.Context, d *Decision, k Key, a netip.Addr, ban *Ban) {
	*d = Decision{}
	p.decide(context.WithoutCancel(ctx), d, k, a, 1)
	if ban != nil {
		listedChallenge(d, ban)
	}
	p.stats.stripe(d.hint()).penalties.Add(1)
}

// challengeMiddleware answers the challenge's answers (a POST to Path)
// before next, which is the Middleware.
func (p *Protector) challengeMiddleware(next http.Handler) http.Handler {
	path := p.chal.path
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			p.answer(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxAnswerBody bounds the form of an answer: a nonce, an answer and a
// return path.
const maxAnswerBody = 8 << 10

// answer handles a POST of the page: a right answer gets a pass cookie
// and 303 back to the form's return path; any other counts one failure
// for the client, which is then answered as its decision says (a fresh
// page when still Challenged, a 303 back when not refused).
func (p *Protector) answer(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxAnswerBody)
	formErr := r.ParseForm()
	ret := challenge.SafeReturn(r.PostForm.Get(challenge.FieldReturn))
	var d Decision
	a, err := p.res.Resolve(r)
	if p.screened(&d, a, err) { // unknown, safe or blocked by a list: never challenged
		p.decided(&d)
		if d.Refused() {
			p.refuse(w, r, &d)
		} else {
			http.Redirect(w, r, ret, http.StatusSeeOther)
		}
		return
	}
	k := p.agg.Key(a)
	if f := p.cfg.KeyFunc; f != nil {
		if id, ok := f(r); ok && id != "" {
			k = p.consumerKeys.Key(id)
		}
	}
	key := k.String()
	err = formErr
	if err == nil {
		err = p.chal.c.Verify(key, r.PostForm.Get(challenge.FieldNonce), r.PostForm.Get(challenge.FieldAnswer))
	}
	switch {
	case err == nil:
		value, exp := p.chal.c.Pass(key)
		http.SetCookie(w, challenge.Cookie(value, exp, p.chal.clock(), r.TLS != nil))
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, ret, http.StatusSeeOther)
		return
	}
	// Counted to the key the nonce was for, never to a consumer the
	// request names: ConsumerFunc's headers are not the gateway's here.
	p.failed(r.Context(), &d, k, a, d.Ban)
	if d.Refused() {
		p.refusePage(w, r, &d, ret)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, ret, http.StatusSeeOther)
}

// servePage writes the challenge page for d, Challenged, whose solution
// returns to ret.
func (p *Protector) servePage(w http.ResponseWriter, d *Decision, ret string) {
	d.WriteHeaders(w.Header())
	challenge.Page{
		Nonce:      p.chal.c.Nonce(p.challengeKey(d).String()),
		Difficulty: p.chal.c.Difficulty(),
		Action:     p.chal.path,
		Return:     ret,
	}.Write(w, d.StatusCode())
}

// refusePage is refuse, with the page for a Challenged d that returns
// to ret.
func (p *Protector) refusePage(w http.ResponseWriter, r *http.Request, d *Decision, ret string) {
	if d.Status == Challenged && p.chal != nil {
		p.servePage(w, d, ret)
		return
	}
	p.refuse(w, r, d)
}
