package catalog

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// MaxOverrideBytes bounds an override catalog read from a file or a URL.
const MaxOverrideBytes = 16 << 20

// ReadOverride reads an override catalog from a file path or an http(s)
// URL, bounded in size (and, for a URL, in time), and returns its raw
// bytes for [Merge].
func ReadOverride(ctx context.Context, ref string, hc *http.Client) ([]byte, error) {
	if !strings.HasPrefix(ref, "http://") && !strings.HasPrefix(ref, "https://") {
		f, err := os.Open(ref)
		if err != nil {
			return nil, fmt.Errorf("catalog override: %w", err)
		}
		defer f.Close()
		return readBounded(f, ref)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ref, nil)
	if err != nil {
		return nil, fmt.Errorf("catalog override: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("catalog override: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("catalog override: GET %s answered %s", ref, resp.Status)
	}
	return readBounded(resp.Body, ref)
}

func readBounded(r io.Reader, ref string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxOverrideBytes+1))
	if err != nil {
		return nil, fmt.Errorf("catalog override %s: %w", ref, err)
	}
	if len(data) > MaxOverrideBytes {
		return nil, fmt.Errorf("catalog override %s is larger than %d bytes", ref, MaxOverrideBytes)
	}
	return data, nil
}
