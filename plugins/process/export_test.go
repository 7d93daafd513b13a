package process

// PIDs returns the pids of every process the plugin started.
func (p *Plugin) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.spawned...)
}
