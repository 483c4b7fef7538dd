package challenge

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultPath is the path the page posts its answer to.
const DefaultPath = "/.protect/challenge"

// CookieName is the name of the pass cookie.
const CookieName = "protect_pass"

// Form fields of the answer.
const (
	FieldNonce  = "nonce"
	FieldAnswer = "answer"
	FieldReturn = "return"
)

// script solves the nonce with SubtleCrypto, in batches of digests, and
// submits the form. It is static, so that the page's CSP allows it by
// its hash: the nonce and the difficulty are read from the form.
const script = `(async()=>{const f=document.getElementById("c"),s=document.getElementById("s");
if(!(window.crypto&&crypto.subtle)){s.textContent="This check needs a secure connection (HTTPS).";return}
const n=f.elements.nonce.value,d=+f.dataset.bits,e=new TextEncoder(),B=512;
const ok=h=>{const b=new Uint8Array(h);let z=0;for(let i=0;i<b.length;i++){if(b[i]===0){z+=8;if(z>=d)return true;continue}z+=Math.clz32(b[i])-24;break}return z>=d};
for(let i=0;;i+=B){const p=[];for(let j=0;j<B;j++)p.push(crypto.subtle.digest("SHA-256",e.encode(n+(i+j))));
const h=await Promise.all(p);for(let j=0;j<B;j++)if(ok(h[j])){f.elements.answer.value=String(i+j);f.submit();return}}})();`

const style = `body{font:16px/1.5 system-ui,sans-serif;max-width:34em;margin:4em auto;padding:0 1em;color:#222}h1{font-size:1.3em}`

func cspHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
}

// CSP is the Content-Security-Policy of the page: nothing but its own
// inline script and style (by hash) and a form posted to its own origin.
var CSP = "default-src 'none'; script-src " + cspHash(script) + "; style-src " + cspHash(style) +
	"; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>Checking your browser</title>
<style>` + style + `</style></head><body>
<h1>Checking your browser</h1>
<p id="s">This address has sent many requests. Your browser is doing a small calculation to show that it is a browser; the page you asked for loads by itself in a moment.</p>
<noscript><p>This check needs JavaScript. Turn JavaScript on for this site and reload the page, or wait a few minutes and try again.</p></noscript>
<form id="c" method="post" action="{{.Action}}" data-bits="{{.Difficulty}}">
<input type="hidden" name="nonce" value="{{.Nonce}}"><input type="hidden" name="answer" value=""><input type="hidden" name="return" value="{{.Return}}">
</form>
<script>` + script + `</script>
</body></html>
`))

// Page is what the challenge page shows.
type Page struct {
	Nonce      string // from Challenger.Nonce
	Difficulty int
	Action     string // the answer path, DefaultPath by default
	Return     string // the URL to go back to: a relative path (SafeReturn)
}

// Write writes the page's fields into w's header (Content-Type, CSP,
// Cache-Control: no-store, nosniff, no referrer), status code and body.
func (pg Page) Write(w http.ResponseWriter, code int) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", CSP)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(code)
	pg.Render(w)
}

// Render writes the page's HTML to w.
func (pg Page) Render(w io.Writer) error { return page.Execute(w, pg) }

// SafeReturn returns s when it is a same-origin relative URL (a path
// with an optional query, starting with one '/', no scheme, no host, no
// backslash, no control character), else "/". A fragment is dropped.
func SafeReturn(s string) string {
	if len(s) == 0 || len(s) > 4096 || s[0] != '/' || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\") {
		return "/"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return "/"
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return "/"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.RequestURI()
}

// Cookie returns the pass cookie for value, which expires at expires:
// HttpOnly, SameSite=Lax, Path=/, Secure when the request came over TLS.
func Cookie(value string, expires time.Time, now time.Time, secure bool) *http.Cookie {
	return &http.Cookie{
		Name:     CookieName,
		Value:    value,
		Path:     "/",
		Expires:  expires,
		MaxAge:   int(expires.Sub(now) / time.Second),
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	}
}
