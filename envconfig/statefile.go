package envconfig

import (
	protect "github.com/httpprotect/protect"
)

// openStateFile opens the memory store of the STATE_FILE variable. The
// Redis URL is checked first: a service given both would keep its bans in
// two places, neither of which the other instances read.
func openStateFile(prefix, path string, opt protect.MemoryOptions) (*protect.MemoryStore, error) {
	opt.Path = path
	store, err := protect.OpenMemoryStore(opt)
	if err != nil {
		return nil, configErr("%sSTATE_FILE=%q: %w", prefix, path, err)
	}
	return store, nil
}
