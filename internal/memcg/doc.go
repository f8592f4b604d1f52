// Package memcg puts a test's child processes into a memory cgroup of
// their own, so that a process a test makes grow on purpose is killed by
// the kernel at the group's limit instead of taking the machine down.
// It supports cgroup v1 (the memory controller mounted at
// /sys/fs/cgroup/memory) and v2 (a unified hierarchy with the memory
// controller), and needs the right to create groups (root).
package memcg
