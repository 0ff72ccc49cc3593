package webui

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// The languages of the pages: the operator's pages are in English; a bot owner's page is
// in Chinese, with English a click away.
const (
	langEN = "en"
	langZH = "zh"
)

// words are the plain words an enrollment's page says, in one language: a status in the
// owner's terms (never iLink's protocol words), and the page's fixed texts.
type words struct {
	Status map[string]string
	// Page texts.
	Title, Scan, ScanHint, QRAlt, QRExpiresIn, QRRenewed, CodeLabel, CodeSend, Expired,
	ExpiredOwner, Blocked, BlockedOwner, Done, Failed, Connection, Other, Cancelled, Bound, Sent, Unreachable string
	// WrongCode says the last code was wrong and how many attempts are left (%d).
	WrongCode string
	// LastAttempt says the last code was wrong and one attempt is left.
	LastAttempt string
}

var wordsByLang = map[string]words{
	langEN: {
		Status: map[string]string{
			vocab.EnrollmentStarting:       "Getting a QR code…",
			vocab.EnrollmentWaiting:        "Waiting for the QR code to be scanned",
			vocab.EnrollmentRedirect:       "Waiting for the QR code to be scanned",
			vocab.EnrollmentScanned:        "Scanned: confirm the login on the phone",
			vocab.EnrollmentNeedsCode:      "WeChat shows a number: type it below",
			vocab.EnrollmentBindedRedirect: "Already bound",
			vocab.EnrollmentConfirmed:      "Done: the bot is connected",
			vocab.EnrollmentExpired:        "The QR code expired",
			vocab.EnrollmentCancelled:      "Cancelled",
			vocab.EnrollmentBlocked:        "Too many wrong codes",
			vocab.EnrollmentAlreadyBound:   "Already bound",
			vocab.EnrollmentFailed:         "Something went wrong",
		},
		Title:        "Connect your WeChat bot",
		Scan:         "Open WeChat on your phone and scan this QR code.",
		ScanHint:     "On a phone, show this page on another screen, or save the picture and scan it from the album.",
		QRAlt:        "QR code to scan with WeChat",
		QRExpiresIn:  "This QR code expires in",
		QRRenewed:    "The QR code expired and was replaced with a new one: scan the new one.",
		CodeLabel:    "WeChat shows a number: type it here",
		CodeSend:     "Send the code",
		Expired:      "The enrollment ran out of time. Start a new one to get a new QR code.",
		ExpiredOwner: "This QR code has expired. Ask the person who sent you this link for a new one.",
		Blocked:      "Too many wrong codes: WeChat blocked this login. Start a new enrollment and scan the new QR code.",
		BlockedOwner: "Too many wrong codes: WeChat blocked this login. Ask the person who sent you this link for a new one.",
		Done:         "Done. You can close this page.",
		Failed:       "Something went wrong. Ask the person who sent you this link to try again.",
		Connection:   "Connection lost: trying again…",
		Other:        "中文",
		Cancelled:    "This login was cancelled.",
		Bound:        "This WeChat account is already connected.",
		Sent:         "Code sent: this page says whether WeChat took it.",
		Unreachable:  "The server cannot be reached right now. This page tries again by itself.",
		WrongCode:    "That code was wrong. %d attempts left.",
		LastAttempt:  "That code was wrong. One attempt left: after another wrong code WeChat blocks this login.",
	},
	langZH: {
		Status: map[string]string{
			vocab.EnrollmentStarting:       "正在获取二维码…",
			vocab.EnrollmentWaiting:        "等待扫码",
			vocab.EnrollmentRedirect:       "等待扫码",
			vocab.EnrollmentScanned:        "已扫码，请在手机上确认登录",
			vocab.EnrollmentNeedsCode:      "微信显示了一个数字，请在下面输入",
			vocab.EnrollmentBindedRedirect: "已经连接过了",
			vocab.EnrollmentConfirmed:      "完成：机器人已连接",
			vocab.EnrollmentExpired:        "二维码已过期",
			vocab.EnrollmentCancelled:      "已取消",
			vocab.EnrollmentBlocked:        "验证码错误次数太多",
			vocab.EnrollmentAlreadyBound:   "已经连接过了",
			vocab.EnrollmentFailed:         "出错了",
		},
		Title:        "连接你的微信机器人",
		Scan:         "打开手机微信，扫描这个二维码。",
		ScanHint:     "如果正在用手机看这个页面，可以在另一块屏幕上打开，或者保存图片后从相册扫码。",
		QRAlt:        "用微信扫描的二维码",
		QRExpiresIn:  "二维码剩余有效时间",
		QRRenewed:    "二维码已过期，已换成新的，请扫描新的二维码。",
		CodeLabel:    "请输入微信上显示的数字",
		CodeSend:     "发送",
		Expired:      "时间已到。请重新开始，获取新的二维码。",
		ExpiredOwner: "二维码已过期。请联系发给你链接的人，要一个新链接。",
		Blocked:      "验证码错误次数太多，微信已阻止这次登录。请重新开始，扫描新的二维码。",
		BlockedOwner: "验证码错误次数太多，微信已阻止这次登录。请联系发给你链接的人，要一个新链接。",
		Done:         "完成了，可以关闭这个页面。",
		Failed:       "出错了。请联系发给你链接的人重试。",
		Connection:   "连接中断，正在重试…",
		Other:        "English",
		Cancelled:    "这次登录已取消。",
		Bound:        "这个微信账号已经连接过了。",
		Sent:         "已发送验证码，这个页面会显示是否正确。",
		Unreachable:  "暂时连接不上服务器，页面会自动重试。",
		WrongCode:    "验证码不对，还可以再试 %d 次。",
		LastAttempt:  "验证码不对，只剩最后一次机会：再错一次，微信会阻止这次登录。",
	},
}

// wordsFor is the words of lang (English for an unknown one).
func wordsFor(lang string) words {
	if w, ok := wordsByLang[lang]; ok {
		return w
	}
	return wordsByLang[langEN]
}

// statusText is an enrollment status in plain words.
func (w words) statusText(status string) string {
	if t, ok := w.Status[status]; ok {
		return t
	}
	return w.Status[vocab.EnrollmentWaiting] // a status iLink added since: still waiting
}

// wrongCode is what the page says after iLink refused a code, or "".
func (w words) wrongCode(wrong, left int) string {
	switch {
	case wrong == 0:
		return ""
	case left == 1:
		return w.LastAttempt
	}
	return fmt.Sprintf(w.WrongCode, left)
}

// ownerLang is the language of an owner's page: ?lang=en or zh, else Chinese.
func ownerLang(r *http.Request) string {
	if strings.EqualFold(r.URL.Query().Get("lang"), langEN) {
		return langEN
	}
	return langZH
}
