package store

import "github.com/httpprotect/protect/internal/testclock"

var newFakeClock = testclock.New
