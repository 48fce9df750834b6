package testcluster

import "syscall"

// childSysProcAttr puts a child in its own process group (a terminal's Ctrl-C reaches
// only the test binary, which then stops the children in order) and has the kernel
// SIGKILL it if the parent dies without cleaning up (panic, timeout, kill -9).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
