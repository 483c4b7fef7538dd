package bench

// protect's Redis store, in one place so that the address and plan adapters
// measure the same store.

import (
	protect "github.com/httpprotect/protect"
	"github.com/httpprotect/protect/redisstore"
)

func projectRedisStore(env *RedisEnv) protect.Store {
	return redisstore.New(env.NewClient(), redisstore.Options{})
}
