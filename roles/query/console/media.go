package console

import (
	"mime"
	"path"
	"strings"
)

// mediaKind is how the console previews an object.
type mediaKind string

const (
	kindImage mediaKind = "image"
	kindVideo mediaKind = "video"
	kindAudio mediaKind = "audio"
	kindText  mediaKind = "text"
	kindJSON  mediaKind = "json"
	kindOther mediaKind = "other"
)

// kindOf decides from the row's content type, or when it has none from
// the key's extension.
func kindOf(contentType, key string) mediaKind {
	ct := contentType
	if ct == "" {
		ct = mime.TypeByExtension(strings.ToLower(path.Ext(key)))
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return kindOther
	}
	switch {
	case inlineImages[mt]:
		return kindImage
	case strings.HasPrefix(mt, "video/"), strings.HasPrefix(mt, "audio/") && videoContainers[strings.ToLower(path.Ext(key))]:
		return kindVideo
	case strings.HasPrefix(mt, "audio/"):
		return kindAudio
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return kindJSON
	case strings.HasPrefix(mt, "text/"):
		return kindText
	}
	return kindOther
}

// videoContainers are the extensions of containers that mostly hold
// video but that many systems' MIME tables call audio (".webm" is
// audio/webm in Debian's). A <video> element plays their audio too, so
// they get the video player.
var videoContainers = map[string]bool{".webm": true, ".mp4": true, ".m4v": true, ".ogv": true, ".mkv": true, ".mov": true}

// inlineImages are the image types shown in <img>. SVG is not among
// them: opened on its own it is a document that runs script.
var inlineImages = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true, "image/avif": true, "image/bmp": true,
}

// servedType is the Content-Type the raw endpoint sends: the object's own
// for the media the pages play, text/plain for text (never text/html,
// which would run as a page of the console's origin), and
// application/octet-stream for everything else.
func servedType(contentType, key string) string {
	ct := contentType
	if ct == "" {
		ct = mime.TypeByExtension(strings.ToLower(path.Ext(key)))
	}
	mt, _, _ := mime.ParseMediaType(ct)
	switch kindOf(contentType, key) {
	case kindVideo:
		if sub, ok := strings.CutPrefix(mt, "audio/"); ok {
			return "video/" + sub
		}
		return mt
	case kindImage, kindAudio:
		return mt
	case kindText, kindJSON:
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}
