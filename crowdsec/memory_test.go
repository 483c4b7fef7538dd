package crowdsec

import (
	"bufio"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/httpprotect/protect/internal/heaptest"
)

// decisionsLAPI answers every poll with n decisions (n < 0: without end),
// each its own address of 10.0.0.0/8.
func decisionsLAPI(t *testing.T, n int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw := bufio.NewWriterSize(w, 64<<10)
		defer bw.Flush()
		bw.WriteString(`{"deleted":null,"new":[`)
		for i := 0; n < 0 || i < n; i++ {
			if i > 0 {
				bw.WriteByte(',')
			}
			_, err := fmt.Fprintf(bw, `{"duration":"3h59m58.384169186s","id":%d,"origin":"CAPI","scenario":"crowdsecurity/ssh-bf","scope":"Ip","type":"ban","value":"10.%d.%d.%d"}`,
				i+1, i>>16&255, i>>8&255, i&255)
			if err != nil {
				return
			}
		}
		bw.WriteString(`]}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An answer is read a decision at a time: one of 100,000 decisions
// (17 MB) costs the decisions kept, not its body; an endless one is cut
// at maxBody and costs no more than the decisions it held by then.
func TestAnswerMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 64 MiB")
	}
	tests := []struct {
		name    string
		n       int
		wantErr string
		bound   uint64
	}{
		{"100,000 decisions", 100_000, "", 48 << 20},
		{"endless", -1, "an answer longer than 67108864 bytes", 2 * maxBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A client without a short timeout: under the race detector,
			// 64 MiB of JSON take longer than the default's.
			client := &http.Client{Timeout: 5 * time.Minute}
			b, err := New(Options{URL: decisionsLAPI(t, tt.n), Key: "k", Client: client, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var perr error
			peak := heaptest.PeakAlloc(func() { perr = b.Poll(t.Context()) })
			if tt.wantErr == "" && perr != nil || tt.wantErr != "" && (perr == nil || !strings.Contains(perr.Error(), tt.wantErr)) {
				t.Fatalf("Poll = %v, want %q", perr, tt.wantErr)
			}
			if tt.n > 0 && b.BlockSet().Len() != tt.n {
				t.Errorf("BlockSet().Len() = %d, want %d", b.BlockSet().Len(), tt.n)
			}
			t.Logf("peak heap above the start: %d MiB", peak>>20)
			if peak > tt.bound {
				t.Errorf("peak heap while polling = %d MiB, want at most %d MiB", peak>>20, tt.bound>>20)
			}
		})
	}
}
