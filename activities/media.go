package activities

import (
	"context"
	"errors"
	"net/http"

	"github.com/ilinkflow/ilinkflow/ilink"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// MediaFetcher downloads and decrypts inbound media by its sealed-at-rest locator (what
// store.GetAttachment opens). It is not an activity: the reply API calls it, so media
// bytes never pass through Temporal.
type MediaFetcher struct {
	// Client is the iLink client configuration (its CDN base, timeouts and HTTP client);
	// MaxMediaBytes caps a download.
	Client ilink.Config
	// NewClient builds the client (nil: ilink.New).
	NewClient func(cfg ilink.Config, token ilink.Secret) (*ilink.Client, error)
}

// Media fetch failures (a *MediaError's Code).
const (
	// MediaGone: the CDN no longer serves the object (expired or removed).
	MediaGone = "media_expired"
	// MediaTooLarge: the object exceeds the download cap.
	MediaTooLarge = "media_too_large"
	// MediaUndecryptable: the object does not decrypt with the message's key.
	MediaUndecryptable = "media_undecryptable"
	// MediaUnavailable: the CDN could not be reached or failed (retry later).
	MediaUnavailable = "cdn_unavailable"
	// MediaBadLocator: the stored locator does not decode (never expected).
	MediaBadLocator = "media_locator_invalid"
)

// MediaError is a typed fetch failure. Its text names the code and the iLink failure
// kind only, never a URL, key or byte of media.
type MediaError struct {
	Code string
	// Status is the CDN's HTTP status, when it answered one.
	Status int
}

// Error implements error.
func (e *MediaError) Error() string { return "media fetch failed: " + e.Code }

// Fetch downloads and decrypts the media a locator names.
func (f *MediaFetcher) Fetch(ctx context.Context, locator sealing.Secret) ([]byte, error) {
	it, err := OpenImageLocator(locator)
	if err != nil {
		return nil, &MediaError{Code: MediaBadLocator}
	}
	var cl *ilink.Client
	if f.NewClient != nil {
		cl, err = f.NewClient(f.Client, "")
	} else {
		cl, err = ilink.New(f.Client, "")
	}
	if err != nil {
		return nil, &MediaError{Code: MediaUnavailable}
	}
	data, err := cl.DownloadItem(ctx, it)
	if err == nil {
		return data, nil
	}
	var ie *ilink.Error
	errors.As(err, &ie)
	switch ilink.CodeOf(err) {
	case ilink.CodeBodyTooLarge:
		return nil, &MediaError{Code: MediaTooLarge}
	case ilink.CodeMedia:
		return nil, &MediaError{Code: MediaUndecryptable}
	case ilink.CodeInvalidInput:
		return nil, &MediaError{Code: MediaBadLocator}
	case ilink.CodeHTTPStatus:
		if ie != nil && ie.Status >= 400 && ie.Status < 500 && ie.Status != http.StatusTooManyRequests {
			return nil, &MediaError{Code: MediaGone, Status: ie.Status}
		}
		if ie != nil {
			return nil, &MediaError{Code: MediaUnavailable, Status: ie.Status}
		}
	}
	return nil, &MediaError{Code: MediaUnavailable}
}
