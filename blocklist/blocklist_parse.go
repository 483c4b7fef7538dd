package blocklist

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// Format is the format of a block list's file. The zero value is
// FormatPlain.
type Format uint8

const (
	// FormatPlain is an address or a CIDR a line; '#' starts a comment,
	// blank lines are skipped. IPsum's level files (levels/3.txt) and
	// most "one address a line" lists are plain.
	FormatPlain Format = iota
	// FormatNetset is FireHOL's .netset and .ipset: a CIDR or an address
	// a line under a '#' header, as plain.
	FormatNetset
	// FormatSpamhaus is Spamhaus DROP (and EDROP, DROPv6), as text
	// ("1.10.16.0/20 ; SBL256894", ';' comments) or as NDJSON
	// ({"cidr":"1.10.16.0/20","sblid":"SBL256894",...}, a metadata line
	// last), told apart line by line by the content. The SBL reference
	// is the entry's note.
	FormatSpamhaus
	// FormatIPsum is stamparm/ipsum's ipsum.txt: "address<TAB>count",
	// where count is how many lists name the address; addresses named by
	// fewer than List.MinCount are skipped.
	FormatIPsum
)

var formatNames = [...]string{"plain", "netset", "spamhaus", "ipsum"}

// String returns "plain", "netset", "spamhaus" or "ipsum".
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// ParseFormat parses a format name as String writes it.
func ParseFormat(s string) (Format, error) {
	for i, n := range formatNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("protect: block list format %q: want plain, netset, spamhaus or ipsum", s)
}

// maxListLine bounds a line of a block list: the longest real one (an
// NDJSON record of Spamhaus) is under 100 bytes, and a line without an
// end must not grow a buffer without bound.
const maxListLine = 4096

// A LineError is a line of a block list that was rejected. The other
// lines are loaded without it. The zero LineError names no line.
type LineError struct {
	Line int    // from 1
	Text string // the line, cut to 80 bytes
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %q: %v", e.Line, e.Text, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// parsedList is what parsing a list gave.
type parsedList struct {
	prefixes []netip.Prefix
	notes    []string // parallel to prefixes; nil while no entry has a note
	bad      []LineError
	skipped  int // data lines below MinCount
}

var (
	errLongLine  = errors.New("longer than 4096 bytes")
	errMapped    = errors.New("an IPv4-mapped IPv6 spelling; write the IPv4 address")
	errZone      = errors.New("a zone is not allowed")
	errNotCIDR   = errors.New("not an address or a CIDR")
	errIPsumLine = errors.New("want address<TAB>count")
)

// parseList reads a whole list of format f. Bad lines are returned in
// bad, each with its number; the error is the reader's alone.
func parseList(r io.Reader, f Format, minCount int) (parsedList, error) {
	var out parsedList
	br := bufio.NewReaderSize(r, maxListLine)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		long := false
		for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of a huge line
			long = true
			_, err = br.ReadSlice('\n')
		}
		if len(line) > 0 || long {
			if long {
				out.bad = append(out.bad, lineError(n, line, errLongLine))
			} else {
				out.parseLine(n, line, f, minCount)
			}
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// add appends an entry; notes are kept from the first entry that has
// one, so that a list without them costs its prefixes alone.
func (out *parsedList) add(p netip.Prefix, note string) {
	if note != "" && out.notes == nil {
		out.notes = make([]string, len(out.prefixes), cap(out.prefixes))
	}
	out.prefixes = append(out.prefixes, p)
	if out.notes != nil {
		out.notes = append(out.notes, note)
	}
}

// entries returns the entries parsed, for tests.
func (out *parsedList) entries() []Entry {
	e := make([]Entry, len(out.prefixes))
	for i := range e {
		e[i] = Entry{Prefix: out.prefixes[i], Note: out.note(i)}
	}
	return e
}

// parsedList is an entrySource, for newBlockSet.
func (out *parsedList) len() int                  { return len(out.prefixes) }
func (out *parsedList) prefix(i int) netip.Prefix { return out.prefixes[i] }
func (out *parsedList) expires(int) int64         { return 0 }
func (out *parsedList) hasNotes() bool            { return out.notes != nil }
func (out *parsedList) hasEnds() bool             { return false }
func (out *parsedList) note(i int) string {
	if out.notes == nil {
		return ""
	}
	return out.notes[i]
}

func lineError(n int, line []byte, err error) LineError {
	t := bytes.TrimRight(line, "\r\n")
	if len(t) > 80 {
		t = t[:80]
	}
	return LineError{Line: n, Text: string(t), Err: err}
}

// parseLine parses line n into out.
func (out *parsedList) parseLine(n int, line []byte, f Format, minCount int) {
	s := strings.TrimSpace(string(line))
	var note string
	switch f {
	case FormatSpamhaus:
		if strings.HasPrefix(s, "{") {
			out.spamhausJSON(n, line, s)
			return
		}
		s, note, _ = strings.Cut(s, ";")
		s, note = strings.TrimSpace(s), strings.TrimSpace(note)
	case FormatIPsum:
		s, _, _ = strings.Cut(s, "#")
		s = strings.TrimSpace(s)
		if s == "" {
			return
		}
		addr, count, ok := strings.Cut(s, "\t")
		if !ok {
			addr, count, ok = strings.Cut(s, " ")
		}
		c, err := strconv.Atoi(strings.TrimSpace(count))
		if !ok || err != nil || c < 0 {
			out.bad = append(out.bad, lineError(n, line, errIPsumLine))
			return
		}
		if c < max(minCount, 1) {
			out.skipped++
			return
		}
		s = strings.TrimSpace(addr)
	default:
		s, _, _ = strings.Cut(s, "#")
		s = strings.TrimSpace(s)
	}
	if s == "" {
		return
	}
	p, err := parseListEntry(s)
	if err != nil {
		out.bad = append(out.bad, lineError(n, line, err))
		return
	}
	out.add(p, note)
}

// spamhausJSON parses one NDJSON record of a DROP list.
func (out *parsedList) spamhausJSON(n int, line []byte, s string) {
	var rec struct {
		CIDR  string `json:"cidr"`
		SBLID string `json:"sblid"`
		Type  string `json:"type"`
	}
	if err := json.Unmarshal([]byte(s), &rec); err != nil {
		out.bad = append(out.bad, lineError(n, line, errors.New("not a JSON record")))
		return
	}
	if rec.Type == "metadata" {
		return
	}
	p, err := parseListEntry(rec.CIDR)
	if err != nil {
		out.bad = append(out.bad, lineError(n, line, err))
		return
	}
	out.add(p, rec.SBLID)
}

// parseListEntry parses an address or a CIDR of a list. Lists are read
// more strictly than they are stored: a mapped spelling, a zone or host
// bits set under the mask say the list is not what it claims to be, and
// the line is refused rather than guessed at.
func parseListEntry(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, errNotCIDR
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("host bits set; did you mean %s?", p.Masked())
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, errNotCIDR
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errZone
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, errMapped
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, errEveryone
	}
	return p, nil
}

// errEveryone refuses a line that lists a whole address family: one such
// line in a fetched list would refuse every client outside SafeNetworks,
// which no list means.
var errEveryone = errors.New("covers every address of its family")
