//go:build !linux

package testcluster

import "syscall"

// childSysProcAttr puts a child in its own process group. Outside Linux there is no
// Pdeathsig: only Close and the signal handler stop the children.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
