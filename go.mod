module github.com/httpprotect/protect

go 1.26.0

require go4.org/netipx v0.0.0-20260823151212-3075585bcbeb
