//go:build !linux

package crowdsectest

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
