// Package redact hides the secrets a URL may carry before it is quoted
// in an error or a log line.
package redact

import (
	"net/url"
	"strings"
)

// URL returns raw with the password of its user info replaced by xxxxx,
// as url.URL.Redacted does. A raw URL that does not parse has everything
// between "//" and its last "@" replaced, so that a password that made
// it unparsable is never shown either.
func URL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if _, has := u.User.Password(); has {
			return u.Redacted()
		}
		return raw // as given: Redacted would escape it
	}
	start := strings.Index(raw, "//")
	at := strings.LastIndex(raw, "@")
	if start < 0 || at < start {
		return raw
	}
	return raw[:start+2] + "xxxxx" + raw[at:]
}
