package paperclipinstall

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTrackerCondition(t *testing.T) {
	type hello struct{ component, name, version string }
	tests := []struct {
		name       string
		hellos     []hello
		wantOK     bool
		wantReason string
		wantIn     []string
	}{
		{name: "nothing yet", wantReason: "Waiting", wantIn: []string{"adapter @pcsync/paperclip-adapter 0.2.0", "plugin @pcsync/paperclip-sandbox 0.3.0", "waiting 1m0s"}},
		{name: "adapter only", hellos: []hello{{"adapter", "@pcsync/paperclip-adapter", "0.2.0"}}, wantReason: "Waiting", wantIn: []string{"plugin @pcsync/paperclip-sandbox 0.3.0"}},
		{name: "both", hellos: []hello{{"adapter", "@pcsync/paperclip-adapter", "0.2.0"}, {"plugin", "@pcsync/paperclip-sandbox", "0.3.0"}},
			wantOK: true, wantReason: "Loaded", wantIn: []string{"adapter @pcsync/paperclip-adapter 0.2.0 and plugin @pcsync/paperclip-sandbox 0.3.0"}},
		{name: "an older plugin", hellos: []hello{{"adapter", "@pcsync/paperclip-adapter", "0.2.0"}, {"plugin", "@pcsync/paperclip-sandbox", "0.1.0"}},
			wantReason: "VersionMismatch", wantIn: []string{"plugin @pcsync/paperclip-sandbox 0.1.0 (in place: @pcsync/paperclip-sandbox 0.3.0)", "restart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			into := filepath.Join(t.TempDir(), "into")
			if _, err := Install(Options{From: packages(t, "0.2.0", "0.3.0"), Into: into, Home: t.TempDir()}); err != nil {
				t.Fatal(err)
			}
			tr, err := NewTracker(into)
			if err != nil {
				t.Fatal(err)
			}
			start := tr.since
			tr.now = func() time.Time { return start.Add(time.Minute) }
			for _, h := range tt.hellos {
				if err := tr.Hello(h.component, h.name, h.version); err != nil {
					t.Fatal(err)
				}
			}
			ok, reason, msg := tr.Condition()
			if ok != tt.wantOK || reason != tt.wantReason {
				t.Errorf("condition %v %s (%s), want %v %s", ok, reason, msg, tt.wantOK, tt.wantReason)
			}
			for _, w := range tt.wantIn {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
		})
	}
}

func TestTrackerRefuses(t *testing.T) {
	if _, err := NewTracker(t.TempDir()); err == nil || !strings.Contains(err.Error(), "pcsync paperclip install --into") {
		t.Errorf("a directory without the packages: error %v, want one naming the init container", err)
	}
	into := filepath.Join(t.TempDir(), "into")
	if _, err := Install(Options{From: packages(t, "0.1.0", "0.1.0"), Into: into, Home: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	tr, err := NewTracker(into)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Hello("ui", "x", "1"); err == nil {
		t.Error("an unknown component is taken")
	}
}
