package crowdsec

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzStream feeds any body to the stream's decoder and applies it: it
// never panics, and every decision it keeps is a valid, masked network
// with an end after now.
func FuzzStream(f *testing.F) {
	f.Add([]byte(`{"deleted":null,"new":[{"duration":"29m59.384169186s","id":2,"origin":"cscli","scenario":"manual 'ban' from 'm1'","scope":"Range","type":"ban","value":"198.51.100.0/24"}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"new":null,"deleted":[{"id":1,"duration":"-21.741432ms","scope":"Ip","type":"ban","value":"192.0.2.7"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := New(Options{URL: "http://127.0.0.1:1", Key: "k"})
		if err != nil {
			t.Fatal(err)
		}
		ans, err := b.readStream(bytes.NewReader(body))
		// The reader reads what encoding/json reads, one decision at a time.
		var whole *struct{ New, Deleted []apiDecision }
		werr := json.Unmarshal(body, &whole)
		if (err == nil) != (werr == nil) {
			t.Fatalf("readStream(%q) = %v; json.Unmarshal = %v", body, err, werr)
		}
		if err != nil {
			return
		}
		if whole != nil && len(whole.Deleted) != len(ans.deleted) {
			t.Fatalf("readStream(%q) deleted %d, json.Unmarshal %d", body, len(ans.deleted), len(whole.Deleted))
		}
		now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		b.apply(ans, now)
		for id, d := range b.decisions {
			if !d.prefix.IsValid() || d.prefix != d.prefix.Masked() || !d.end.After(now) {
				t.Fatalf("decision %d = %+v: want a masked network that ends after now", id, d)
			}
		}
		b.rebuild(now)
		if b.BlockSet().Len() > len(b.decisions) {
			t.Fatalf("%d entries of %d decisions", b.BlockSet().Len(), len(b.decisions))
		}
	})
}
