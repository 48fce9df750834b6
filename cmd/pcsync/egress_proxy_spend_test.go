package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

// TestEgressProxySpend: with --spend, the proxy's credential route has
// the company's budget (its metric says so); a --spend it cannot use is
// refused at start, saying why.
func TestEgressProxySpend(t *testing.T) {
	dir := t.TempDir()
	allow := `{"company":"acme","hosts":["api.anthropic.com"],"ports":[443]}`
	creds := fmt.Sprintf(`{"company":"acme","tokensFile":%q,"credentials":[{"name":"claude","provider":"anthropic","type":"apiKey","upstream":"https://api.anthropic.com","keyFile":%q}]}`,
		filepath.Join(dir, "annotations"), filepath.Join(dir, "key"))
	spendOf := func(tz string) string {
		return fmt.Sprintf(`{"company":"acme","monthlyCents":500,"timeZone":%q,"annotationsFile":%q}`, tz, filepath.Join(dir, "annotations"))
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no credential route", []string{"--spend", spendOf("UTC")}, "egress-proxy: --spend counts the credential route's spend, and there is none without --credentials"},
		{"bad time zone", []string{"--credentials", creds, "--spend", spendOf("Mars/Olympus")},
			`egress-proxy: --spend: spend acme: time zone "Mars/Olympus": unknown time zone Mars/Olympus`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			code := run(context.Background(), append([]string{"egress-proxy", "--allow-list", allow, "--listen", freeAddr(t), "--metrics", ""}, tc.args...), io.Discard, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want an error %q", code, stderr.String(), tc.want)
			}
		})
	}

	metrics := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"egress-proxy", "--allow-list", allow, "--listen", freeAddr(t), "--metrics", metrics,
			"--credentials", creds, "--spend", spendOf("Europe/Paris")}, io.Discard, stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit code %d; stderr:\n%s", code, stderr.String())
		}
	}()
	want := `pcsync_egress_proxy_budget_month_cents{company="acme"} 500`
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			continue
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		break
	}
	if !strings.Contains(string(body), want) {
		t.Errorf("metrics without %q:\n%s", want, body)
	}
	// /spend: what this process counted, for the daemon to keep.
	resp, err := http.Get("http://" + metrics + "/spend")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep spend.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || len(rep.Process) != 12 || rep.Company != 0 {
		t.Errorf("/spend: %+v (%v)", rep, err)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	if m := time.Now().In(paris).Format("2006-01"); rep.Month != m {
		t.Errorf("/spend month %q, want %q (Paris)", rep.Month, m)
	}
}
