package redact

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkStream redacts 4 MiB of typical command output (log lines, some
// base64 and hex) in 32 KiB chunks with a vault of three values, and
// compares it with the least any redaction must do, searching the same
// text for the three plain values with strings.Index, in the same run.
func BenchmarkStream(b *testing.B) {
	vault := map[string]string{
		"GITHUB_TOKEN": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
		"DB_PASSWORD":  "correct horse battery staple",
		"API_KEY":      "sk-live-0123456789abcdefABCDEF",
	}
	v := New(vault)
	var text strings.Builder
	for i := 0; text.Len() < 4<<20; i++ {
		fmt.Fprintf(&text, "2026-12-01T03:18:%02d.%06dZ INFO request id=%d path=/api/v1/items/%d status=200 took=%dms\n", i%60, i, i, i*7, i%97)
		if i%50 == 0 {
			text.WriteString(base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("blob %d of some binary payload that is printed encoded", i))) + "\n")
			fmt.Fprintf(&text, "%x\n", fmt.Sprintf("hexdump line %d", i))
		}
	}
	s := text.String()
	b.SetBytes(int64(len(s)))
	var redact, plain time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		st := v.NewStream()
		n := 0
		for off := 0; off < len(s); off += 32 << 10 {
			n += len(st.Write(s[off:min(off+32<<10, len(s))]))
		}
		n += len(st.Flush())
		t1 := time.Now()
		found := 0
		for _, value := range vault {
			if strings.Index(s, value) >= 0 {
				found++
			}
		}
		plain += time.Since(t1)
		redact += t1.Sub(t0)
		if n != len(s) || found != 0 {
			b.Fatalf("the text changed (%d of %d bytes) or holds a value (%d)", n, len(s), found)
		}
	}
	mb := float64(len(s)) / (1 << 20)
	b.ReportMetric(mb/(redact.Seconds()/float64(b.N)), "redact-MiB/s")
	b.ReportMetric(mb/(plain.Seconds()/float64(b.N)), "index-MiB/s")
	b.ReportMetric(float64(redact)/float64(plain), "ratio")
}
