package admin

import (
	"net/http"
	"time"

	"github.com/httpprotect/protect"
)

func (h *handler) allows(w http.ResponseWriter, r *http.Request) {
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "allows", err)
		return
	}
	recs, err := svc.Allows(r.Context())
	if err != nil {
		writeError(w, h.log, "allows", err)
		return
	}
	writeJSON(w, http.StatusOK, recs)
}

func (h *handler) allow(w http.ResponseWriter, r *http.Request) {
	var req AllowRequest
	if !h.readBody(w, r, "allow", &req) {
		return
	}
	o := AllowOptions{Reason: req.Reason, By: req.By}
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d < time.Second || d > protect.MaxDuration {
			writeError(w, h.log, "allow", badf("for %q: want a duration from 1s to %v", req.For, protect.MaxDuration))
			return
		}
		o.For = d
	}
	if len(req.Targets) > MaxTargets {
		writeTooMany(w, "allow", len(req.Targets))
		return
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "allow", err)
		return
	}
	res, err := svc.Allow(r.Context(), req.Targets, o)
	if err != nil {
		writeErrorDone(w, h.log, "allow", err, res.Allowed)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}

func (h *handler) disallow(w http.ResponseWriter, r *http.Request) {
	if n := countParam(r.URL.RawQuery, "target"); n > MaxTargets {
		writeTooMany(w, "disallow", n)
		return
	}
	svc, err := h.service(r)
	if err != nil {
		writeError(w, h.log, "disallow", err)
		return
	}
	recs, err := svc.Disallow(r.Context(), r.URL.Query()["target"])
	if err != nil {
		writeErrorDone(w, h.log, "disallow", err, recs)
		return
	}
	writeJSON(w, http.StatusOK, recs)
}
