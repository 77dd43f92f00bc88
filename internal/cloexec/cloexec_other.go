//go:build !unix

package cloexec

func setFD(int) {}
