//go:build integration

package deploy

import (
	"context"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
	companystatus "github.com/pcsync/pcsync/pkg/companystatus"
	"github.com/pcsync/pcsync/pkg/companystatus/statusctl"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// checkStatusRights records the status of the companies of dir after the
// apply that gave report, as the daemon does, with sa's rights (the
// Role pcsync in pcsync-system): the object is written, Ready, with its
// Event.
func checkStatusRights(t *testing.T, c *testcluster.Cluster, sa *rest.Config, dir string, report *apply.ChangeSet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.ApplyCRD(ctx, companystatus.CRD, companystatus.CRDName); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(ctx, dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	o := statusctl.DefaultOptions()
	o.Namespace, o.Owner, o.Trigger = "pcsync-system", apply.ParentID("pcsync", "pcsync-system"), func() {}
	o.Logger = slog.New(slog.DiscardHandler)
	ctrl, err := statusctl.New(sa, o)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	if err := ctrl.Run(rctx); err != nil {
		t.Fatalf("the status controller as %s: %v", serviceAccount, err)
	}
	defer func() { stop(); ctrl.Wait() }()
	ctrl.Observe(reconcile.Outcome{Started: time.Now(), Model: m, Revision: "rbac", Report: report})
	for {
		s, err := companystatus.Get(ctx, c.Dynamic(), "pcsync-system", "acme")
		if err == nil && s.Status.Revision == "rbac" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("acme's status, written as %s: %v (last %+v)", serviceAccount, err, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		l, err := c.Client().CoreV1().Events("pcsync-system").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=" + companystatus.Kind + ",involvedObject.name=acme"})
		if err == nil && len(l.Items) > 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the Event on acme's status, recorded as %s: %v", serviceAccount, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
