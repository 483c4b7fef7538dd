package crowdsectest

import "syscall"

// procAttr makes crowdsec die with the test binary, should the binary be
// killed before its cleanups run.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
