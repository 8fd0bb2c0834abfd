//go:build !linux

package main

// filesystemOf is known only on Linux.
func filesystemOf(string) string { return "" }
