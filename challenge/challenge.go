// Package challenge is the proof-of-work challenge of protect: signed
// nonces bound to a client's counting key, the check of an answer
// (SHA-256 with leading zero bits), the signed pass cookie a solved
// nonce buys, and the self-contained page that solves a nonce in a
// browser. It imports nothing of protect: protect's Config.Challenge
// turns it on, and Middleware serves its page and answers.
//
// Tokens are base64url (no padding) of a payload, a dot, and the
// base64url HMAC-SHA-256 of a type byte and the payload under the
// secret. A nonce's payload is its expiry (Unix seconds, 8 bytes, big
// endian), 16 random bytes and the key; a pass's is its expiry and the
// key. Every instance given one secret accepts the others' nonces and
// passes.
package challenge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults.
const (
	// DefaultDifficulty is the leading zero bits an answer's hash must
	// have: 2^15 hashes to try on average, which headless Chromium on a
	// 2-vCPU server does in a median of well under a second (see the
	// repository's docs/challenge.md for the figure and its command).
	DefaultDifficulty = 15
	// MaxDifficulty bounds Difficulty: 2^32 hashes is minutes in a
	// browser.
	MaxDifficulty = 32
	// DefaultNonceTTL is how long a nonce may be answered.
	DefaultNonceTTL = 5 * time.Minute
	// DefaultPassTTL is how long a pass lasts.
	DefaultPassTTL = time.Hour
	// DefaultMaxSpent bounds the spent nonces kept against replays.
	DefaultMaxSpent = 100_000
	// SecretSize is the size of a secret New makes.
	SecretSize = 32
	// MaxKeyLen bounds the key a token carries.
	MaxKeyLen = 512
)

// Errors of Verify and CheckPass. Each is a failure of the client's.
var (
	// ErrMalformed: not a token of this package, or an answer that is
	// not a decimal number of at most 20 digits.
	ErrMalformed = errors.New("challenge: malformed token")
	// ErrSignature: the token's HMAC does not match (forged, or made
	// under another secret).
	ErrSignature = errors.New("challenge: bad signature")
	// ErrExpired: the token's expiry has passed.
	ErrExpired = errors.New("challenge: expired")
	// ErrKey: a genuine token made for another key: a nonce or a pass
	// carried to another address.
	ErrKey = errors.New("challenge: token of another key")
	// ErrWork: the answer's hash has too few leading zero bits.
	ErrWork = errors.New("challenge: answer does not do the work")
	// ErrReplay: the nonce was answered before.
	ErrReplay = errors.New("challenge: nonce already answered")
)

// Config configures a Challenger. The zero value works, with a random
// secret of its own.
type Config struct {
	// Secret is the HMAC key [SecretSize random bytes]. Give every
	// instance of a service the same one, so that each accepts the
	// others' passes. At least 16 bytes.
	Secret []byte
	// Difficulty is the leading zero bits of SHA-256(nonce || answer)
	// [DefaultDifficulty]; 1 to MaxDifficulty.
	Difficulty int
	// NonceTTL is how long a nonce may be answered [DefaultNonceTTL].
	NonceTTL time.Duration
	// PassTTL is how long a pass lasts [DefaultPassTTL].
	PassTTL time.Duration
	// MaxSpent bounds the spent nonces kept until they expire
	// [DefaultMaxSpent]. Past it the oldest is forgotten, unexpired or
	// not: an answer is never refused for want of room, which one client
	// could otherwise bring about for every other by answering many
	// nonces. A replay of a nonce so forgotten gets a pass for the key
	// its first answer got one for: nothing the client did not have.
	MaxSpent int
	// Clock tells the time [time.Now].
	Clock func() time.Time
}

// Token types, MAC'd before the payload so that a nonce is never a pass.
const (
	typeNonce = 'n'
	typePass  = 'p'
)

// A Challenger makes and checks nonces and passes. It is safe for
// concurrent use.
type Challenger struct {
	secret     []byte
	difficulty int
	nonceTTL   time.Duration
	passTTL    time.Duration
	maxSpent   int
	clock      func() time.Time

	mu    sync.Mutex
	spent map[[sha256.Size]byte]int64 // a spent nonce's MAC → its expiry, Unix seconds
	order []spentNonce                // the spent nonces from order[head] on, oldest first
	head  int

	// scratch holds *scratch: what checking a token needs, reused, so
	// that a check allocates nothing.
	scratch sync.Pool
}

// scratch is the memory of one check of a token: its HMAC, keyed, and
// buffers for the token and its decoded payload.
type scratch struct {
	h       hash.Hash
	tok     [b64EncodedMax]byte
	payload [1 + 8 + 16 + MaxKeyLen]byte // the type byte, then the payload
	mac     [sha256.Size]byte
}

// b64EncodedMax bounds the tokens open reads: the longest payload and
// its MAC, in base64url (rounded up to whole groups), and the dot.
const b64EncodedMax = (8+16+MaxKeyLen+2)/3*4 + 1 + (sha256.Size+2)/3*4

func (c *Challenger) getScratch() *scratch {
	if sc, ok := c.scratch.Get().(*scratch); ok {
		sc.h.Reset()
		return sc
	}
	return &scratch{h: hmac.New(sha256.New, c.secret)}
}

// New checks cfg, fills in its defaults and returns a Challenger. It
// reports, in generated, whether it made the secret (Config.Secret was
// empty): such a Challenger's passes are refused by every other one.
func New(cfg Config) (c *Challenger, generated bool, err error) {
	if len(cfg.Secret) == 0 {
		cfg.Secret = make([]byte, SecretSize)
		rand.Read(cfg.Secret)
		generated = true
	}
	switch {
	case len(cfg.Secret) < 16:
		return nil, false, errors.New("challenge: Secret shorter than 16 bytes")
	case cfg.Difficulty < 0 || cfg.Difficulty > MaxDifficulty:
		return nil, false, errors.New("challenge: Difficulty " + strconv.Itoa(cfg.Difficulty) + ": want 1 to " + strconv.Itoa(MaxDifficulty))
	case cfg.NonceTTL < 0 || cfg.PassTTL < 0 || cfg.MaxSpent < 0:
		return nil, false, errors.New("challenge: NonceTTL, PassTTL and MaxSpent must not be negative")
	}
	if cfg.Difficulty == 0 {
		cfg.Difficulty = DefaultDifficulty
	}
	if cfg.NonceTTL == 0 {
		cfg.NonceTTL = DefaultNonceTTL
	}
	if cfg.PassTTL == 0 {
		cfg.PassTTL = DefaultPassTTL
	}
	if cfg.MaxSpent == 0 {
		cfg.MaxSpent = DefaultMaxSpent
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Challenger{
		secret:     append([]byte(nil), cfg.Secret...),
		difficulty: cfg.Difficulty,
		nonceTTL:   cfg.NonceTTL,
		passTTL:    cfg.PassTTL,
		maxSpent:   cfg.MaxSpent,
		clock:      cfg.Clock,
		spent:      map[[sha256.Size]byte]int64{},
	}, generated, nil
}

// Difficulty returns the leading zero bits an answer must give.
func (c *Challenger) Difficulty() int { return c.difficulty }

// PassTTL returns how long a pass lasts.
func (c *Challenger) PassTTL() time.Duration { return c.passTTL }

// Nonce returns a new nonce for key, to be answered within NonceTTL.
func (c *Challenger) Nonce(key string) string {
	payload := make([]byte, 8+16, 8+16+len(key))
	binary.BigEndian.PutUint64(payload, uint64(c.clock().Add(c.nonceTTL).Unix()))
	rand.Read(payload[8:24])
	payload = append(payload, key...)
	return c.sign(typeNonce, payload)
}

// Pass returns a pass for key and when it expires.
func (c *Challenger) Pass(key string) (value string, expires time.Time) {
	expires = c.clock().Add(c.passTTL).Truncate(time.Second)
	payload := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(payload, uint64(expires.Unix()))
	payload = append(payload, key...)
	return c.sign(typePass, payload), expires
}

// Verify checks answer to nonce for key: the nonce's signature, its
// expiry, that it was made for key, the work, and that it was not
// answered before; a nonce that passes is spent. The checks run in
// that order, and the error is the first that fails.
func (c *Challenger) Verify(key, nonce, answer string) error {
	sc := c.getScratch()
	defer c.scratch.Put(sc)
	payload, mac, err := c.open(sc, typeNonce, nonce, 8+16)
	if err != nil {
		return err
	}
	exp := int64(binary.BigEndian.Uint64(payload))
	now := c.clock().Unix()
	if now >= exp {
		return ErrExpired
	}
	if string(payload[24:]) != key {
		return ErrKey
	}
	if !validAnswer(answer) {
		return ErrMalformed
	}
	if !Works(nonce, answer, c.difficulty) {
		return ErrWork
	}
	return c.spend(mac, exp, now)
}

// CheckPass checks a pass for key: its signature, its expiry, and that
// it was made for key (ErrKey: a genuine pass carried to another key).
func (c *Challenger) CheckPass(key, value string) error {
	sc := c.getScratch()
	defer c.scratch.Put(sc)
	payload, _, err := c.open(sc, typePass, value, 8)
	if err != nil {
		return err
	}
	if c.clock().Unix() >= int64(binary.BigEndian.Uint64(payload)) {
		return ErrExpired
	}
	if string(payload[8:]) != key {
		return ErrKey
	}
	return nil
}

// A spentNonce is a spent nonce's MAC and its expiry, in Challenger.order.
type spentNonce struct {
	mac [sha256.Size]byte
	exp int64
}

// spend marks the nonce of mac, which expires at exp, as answered. It
// forgets, oldest first, the spent nonces that expired, and the oldest
// while MaxSpent are kept: each answer costs a few steps, whatever the
// set holds.
func (c *Challenger) spend(mac [sha256.Size]byte, exp, now int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.spent[mac]; ok {
		return ErrReplay
	}
	for c.head < len(c.order) {
		o := &c.order[c.head]
		if now < o.exp && len(c.spent) < c.maxSpent {
			break
		}
		if c.spent[o.mac] == o.exp { // else forgotten, and spent again since
			delete(c.spent, o.mac)
		}
		c.head++
	}
	if c.head > len(c.order)/2 { // what was forgotten goes, in one copy now and then
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	c.spent[mac] = exp
	c.order = append(c.order, spentNonce{mac, exp})
	return nil
}

// Spent returns how many answered nonces are kept against replays.
func (c *Challenger) Spent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.spent)
}

// b64 is the tokens' encoding: base64url without padding, strict, so that
// a token has one spelling (trailing bits of a last character must be
// zero).
var b64 = base64.RawURLEncoding.Strict()

func (c *Challenger) mac(typ byte, payload []byte) [sha256.Size]byte {
	h := hmac.New(sha256.New, c.secret)
	h.Write([]byte{typ})
	h.Write(payload)
	var m [sha256.Size]byte
	h.Sum(m[:0])
	return m
}

func (c *Challenger) sign(typ byte, payload []byte) string {
	m := c.mac(typ, payload)
	return b64.EncodeToString(payload) + "." + b64.EncodeToString(m[:])
}

// open checks the signature of a token of typ whose payload is at least
// min bytes, and returns the payload (in sc, valid until sc is put
// back) and its MAC. It allocates nothing.
func (c *Challenger) open(sc *scratch, typ byte, token string, min int) ([]byte, [sha256.Size]byte, error) {
	var m [sha256.Size]byte
	i := strings.IndexByte(token, '.')
	if i < 0 || i > b64.EncodedLen(8+16+MaxKeyLen) || b64.DecodedLen(len(token)-i-1) != sha256.Size {
		return nil, m, ErrMalformed
	}
	// The decoder skips line breaks, even strict: a token with them would
	// be a second spelling of one.
	if strings.IndexByte(token, '\n') >= 0 || strings.IndexByte(token, '\r') >= 0 {
		return nil, m, ErrMalformed
	}
	tok := sc.tok[:copy(sc.tok[:], token)]
	n, err := b64.Decode(sc.payload[1:], tok[:i])
	if err != nil || n < min {
		return nil, m, ErrMalformed
	}
	if k, err := b64.Decode(m[:], tok[i+1:]); err != nil || k != sha256.Size {
		return nil, m, ErrMalformed
	}
	sc.payload[0] = typ
	sc.h.Write(sc.payload[:1+n])
	if !hmac.Equal(m[:], sc.h.Sum(sc.mac[:0])) {
		return nil, m, ErrSignature
	}
	return sc.payload[1 : 1+n], m, nil
}

// validAnswer reports whether answer is a decimal number of 1 to 20
// digits, as the page sends.
func validAnswer(answer string) bool {
	if len(answer) == 0 || len(answer) > 20 {
		return false
	}
	for i := 0; i < len(answer); i++ {
		if answer[i] < '0' || answer[i] > '9' {
			return false
		}
	}
	return true
}

// Works reports whether SHA-256(nonce || answer) has at least
// difficulty leading zero bits.
func Works(nonce, answer string, difficulty int) bool {
	h := sha256.New()
	h.Write([]byte(nonce))
	h.Write([]byte(answer))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return LeadingZeros(sum[:]) >= difficulty
}

// LeadingZeros returns the number of leading zero bits of b.
func LeadingZeros(b []byte) int {
	n := 0
	for _, x := range b {
		if x != 0 {
			return n + bits.LeadingZeros8(x)
		}
		n += 8
	}
	return n
}

// Solve finds the smallest answer to nonce at difficulty, as the page's
// script does: the decimal counter 0, 1, 2, … For tests and for Go
// clients.
func Solve(nonce string, difficulty int) string {
	for i := uint64(0); ; i++ {
		a := strconv.FormatUint(i, 10)
		if Works(nonce, a, difficulty) {
			return a
		}
	}
}
