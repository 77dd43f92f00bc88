//go:build unix

package cloexec

import "syscall"

func setFD(fd int) { syscall.CloseOnExec(fd) }
