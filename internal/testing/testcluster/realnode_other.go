//go:build !linux

package testcluster

import (
	"context"
	"errors"
	"syscall"
)

// errRealNodeLinux is what every real-node step returns off Linux.
var errRealNodeLinux = errors.New("a real node needs Linux (kubelet, containerd, runc, cgroups)")

type hostTools struct{ containerd, runc, ip string }

func checkRealNodeHost(RealNodeOptions) (hostTools, error) { return hostTools{}, errRealNodeLinux }

type machineLock struct{}

func lockMachine(context.Context, string, func(string, ...any)) (*machineLock, error) {
	return nil, errRealNodeLinux
}
func (*machineLock) record(string) error   { return errRealNodeLinux }
func (*machineLock) previousDir() string   { return "" }
func (*machineLock) release(bool) error    { return nil }
func prepareCgroups() error                { return errRealNodeLinux }
func setupNodeBridge(string, string) error { return errRealNodeLinux }
func sweepNode(string, []string, func(string, ...any)) error {
	return errRealNodeLinux
}
func rss(int) int64                                  { return 0 }
func nodeProcess(string) int                         { return 0 }
func freebind(string, string, syscall.RawConn) error { return errRealNodeLinux }
