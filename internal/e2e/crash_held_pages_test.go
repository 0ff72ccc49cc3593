package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// heldCrashPages records, in front of the crash tap, which getupdates response of which bot's
// poller went to which worker process: the crash tap's own record does not tell bots
// apart, and the allowance for a message lost in flight is about the last response one
// poller of a killed process received.
type heldCrashPages struct {
	tap *crashTap

	mu        sync.Mutex
	tokens    map[string]string // bot token → bot id
	isHeld    func(text string) bool
	heldSends int // sendmessage calls that carried a held reply
	seq       int
	last      map[heldCrashEpoch]crashPage // per bot and process, the response to its latest request
	handed    map[uint64][]crashPage       // per message id, the responses that carried it
	pages     map[string][]crashPage       // per bot, the non-empty responses
}

func (p *heldCrashPages) addBot(token, botID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens[token] = botID
}

// setHeld tells the recorder which texts are held replies (the agent's answers say so
// before the next window sends them).
func (p *heldCrashPages) setHeld(isHeld func(text string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isHeld = isHeld
}

func (p *heldCrashPages) heldSendCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldSends
}

func (p *heldCrashPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ilink/bot/getupdates":
	case "/ilink/bot/sendmessage":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Msg struct {
				ItemList []struct {
					TextItem *struct {
						Text string `json:"text"`
					} `json:"text_item"`
				} `json:"item_list"`
			} `json:"msg"`
		}
		if json.Unmarshal(body, &req) == nil && len(req.Msg.ItemList) > 0 && req.Msg.ItemList[0].TextItem != nil {
			p.mu.Lock()
			held := p.isHeld != nil && p.isHeld(req.Msg.ItemList[0].TextItem.Text)
			if held {
				p.heldSends++
			}
			p.mu.Unlock()
			if held {
				p.tap.fire(heldCrashOnHeldSend) // the request is in: the simulator handles it whatever happens next
			}
		}
		p.tap.ServeHTTP(w, r)
		return
	default:
		p.tap.ServeHTTP(w, r)
		return
	}
	p.tap.mu.Lock()
	epoch := p.tap.epoch
	p.tap.mu.Unlock()
	p.mu.Lock()
	p.seq++
	page := crashPage{seq: p.seq, epoch: epoch, at: time.Now()}
	bot := p.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	p.mu.Unlock()
	rec := &crashBody{ResponseWriter: w}
	p.tap.ServeHTTP(rec, r)
	page.ids = pageMessageIDs(rec.buf.Bytes())
	p.mu.Lock()
	defer p.mu.Unlock()
	k := heldCrashEpoch{bot, epoch}
	if prev, ok := p.last[k]; !ok || page.seq > prev.seq {
		p.last[k] = page
	}
	if len(page.ids) > 0 {
		if p.pages == nil {
			p.pages = map[string][]crashPage{}
		}
		p.pages[bot] = append(p.pages[bot], page)
		for _, id := range page.ids {
			p.handed[id] = append(p.handed[id], page)
		}
	}
}

// pageOf is the latest response that carried message id.
func (p *heldCrashPages) pageOf(id uint64) (crashPage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.handed[id]
	if len(ps) == 0 {
		return crashPage{}, false
	}
	return ps[len(ps)-1], true
}

// lastOf is the response to the latest getupdates request of a bot's poller in a worker
// process.
func (p *heldCrashPages) lastOf(bot string, epoch int) (crashPage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pg, ok := p.last[heldCrashEpoch{bot, epoch}]
	return pg, ok
}
