// Package cpu reads how much CPU time a process, another process or the
// whole machine has used, for benchmarks that print CPU per call or per
// operation. Where the operating system does not tell, the figures are
// zero, never an estimate.
package cpu
