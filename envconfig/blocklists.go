package envconfig

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	protect "github.com/httpprotect/protect"
)

// envBlockLists reads HTTP_PROTECT_BLOCKLISTS: a comma list of entries
// [NAME=][challenge:][FORMAT[:MINCOUNT]:]PATH-OR-URL, such as
//
//	spamhaus:/etc/protect/drop.txt,firehol=netset:https://iplists.firehol.org/files/firehol_level1.netset,ipsum:3:/var/lib/protect/ipsum.txt
//
// FORMAT is plain (the default), netset, spamhaus or ipsum; MINCOUNT is
// IPsum's. "challenge:" marks the list to challenge rather than block
// (BlockList.Challenge): "suspect=challenge:ipsum:1:/var/lib/ipsum.txt". NAME defaults to the file's name without its extension
// ("drop"). A URL list keeps its last good copy in
// HTTP_PROTECT_BLOCKLIST_DIR, as NAME.cache, when that is set.
func envBlockLists(c *settings, v string) error {
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		l, err := parseBlockListEntry(e)
		if err != nil {
			return errEnvValue(fmt.Sprintf("entry %q: %v", e, err))
		}
		for _, o := range c.BlockLists {
			if o.Name == l.Name {
				return errEnvValue(fmt.Sprintf("entry %q: a second list named %q; name one of them with NAME=", e, l.Name))
			}
		}
		if l.URL != "" && c.blockListDir != "" {
			l.Cache = filepath.Join(c.blockListDir, l.Name+".cache")
		}
		c.BlockLists = append(c.BlockLists, l)
	}
	return nil
}

func parseBlockListEntry(e string) (protect.BlockList, error) {
	var l protect.BlockList
	if name, rest, ok := strings.Cut(e, "="); ok && !strings.ContainsAny(name, ":/") {
		l.Name, e = name, rest
	}
	if rest, ok := strings.CutPrefix(e, "challenge:"); ok {
		l.Challenge, e = true, rest
	}
	if head, rest, ok := strings.Cut(e, ":"); ok && head != "http" && head != "https" {
		f, err := protect.ParseFormat(head)
		if err != nil {
			return l, fmt.Errorf("format %q: want plain, netset, spamhaus or ipsum", head)
		}
		l.Format, e = f, rest
		if n, rest, ok := strings.Cut(e, ":"); ok && n != "http" && n != "https" {
			m, err := strconv.Atoi(n)
			if err != nil || m < 1 || f != protect.FormatIPsum {
				return l, fmt.Errorf("%q after %s: only ipsum takes a minimum count (ipsum:3:PATH)", n, head)
			}
			l.MinCount, e = m, rest
		}
	}
	if e == "" {
		return l, fmt.Errorf("no path or URL")
	}
	base := e
	if strings.HasPrefix(e, "http://") || strings.HasPrefix(e, "https://") {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" {
			return l, fmt.Errorf("not a URL with a host")
		}
		l.URL, base = e, path.Base(u.Path)
	} else {
		l.Path = e
		base = filepath.Base(e)
	}
	if l.Name == "" {
		l.Name = strings.TrimSuffix(base, path.Ext(base))
	}
	if l.Name == "" || l.Name == "/" || l.Name == "." {
		return l, fmt.Errorf("no name to give it: write NAME=%s", e)
	}
	// protect.New's rule for a list's Name, checked here so that the
	// error names the variable, not BlockLists[i].
	if len(l.Name) > 64 || strings.IndexFunc(l.Name, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return l, fmt.Errorf("name %q: want 1 to 64 printable bytes, no spaces; write NAME=%s", l.Name, e)
	}
	return l, nil
}
