package metrics

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// Health answers GET /healthz: 200 when every active account completed a getupdates
// round trip within Window (counted from its last change of state when later: see
// [Source]'s PollAges), 503 otherwise with the stale accounts listed (account keys only:
// no secret), and 503 when the store cannot be read.
type Health struct {
	Source Source
	// Window is how old an account's last good poll may be (3 long-poll periods by
	// default in the gateway).
	Window time.Duration
	// Logger receives store failures (slog.Default when nil).
	Logger *slog.Logger
}

// HealthReport is the JSON body of /healthz.
type HealthReport struct {
	Status string `json:"status"` // ok, unhealthy
	// Accounts counts the active accounts checked.
	Accounts      int            `json:"accounts"`
	WindowSeconds float64        `json:"window_seconds"`
	Stale         []StaleAccount `json:"stale,omitempty"`
	Error         string         `json:"error,omitempty"`
}

// StaleAccount is an active account whose last good poll is older than the window.
type StaleAccount struct {
	Account       string     `json:"account"`
	LastPollAt    *time.Time `json:"last_poll_at,omitempty"`
	SecondsSince  float64    `json:"seconds_since_last_good_poll"`
	AccountStatus string     `json:"status"`
}

// Check evaluates the health now (the ages are read on the store's clock).
func (h *Health) Check(ctx context.Context) HealthReport {
	rep := HealthReport{Status: "ok", WindowSeconds: h.Window.Seconds()}
	ages, err := h.Source.PollAges(ctx)
	if err != nil {
		log := h.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("health check could not read the store", "error", err)
		rep.Status, rep.Error = "unhealthy", "store unavailable"
		return rep
	}
	rep.Accounts = len(ages)
	for _, a := range ages {
		if a.Since > h.Window {
			rep.Stale = append(rep.Stale, StaleAccount{Account: a.AccountKey, LastPollAt: a.LastPollAt,
				SecondsSince: a.Since.Seconds(), AccountStatus: vocab.AccountActive})
		}
	}
	sort.Slice(rep.Stale, func(i, j int) bool { return rep.Stale[i].Account < rep.Stale[j].Account })
	if len(rep.Stale) > 0 {
		rep.Status = "unhealthy"
	}
	return rep
}

// ServeHTTP implements http.Handler.
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	rep := h.Check(ctx)
	code := http.StatusOK
	if rep.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
}
