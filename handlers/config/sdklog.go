package config

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/smithy-go/logging"
)

// SDKLogger routes the AWS SDK's log lines (retries, clock skew, checksum
// warnings, …) through log, so they are JSON like every other line, with
// source "aws-sdk". The SDK's WARN is slog's Warn and its DEBUG slog's
// Debug; anything else is Info. Request and response bodies are never
// logged (no ClientLogMode is set).
func SDKLogger(log *slog.Logger) logging.Logger {
	return sdkLogger{log: log, ctx: context.Background()}
}

type sdkLogger struct {
	log *slog.Logger
	ctx context.Context
}

// Logf implements logging.Logger.
func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelInfo
	switch c {
	case logging.Warn:
		level = slog.LevelWarn
	case logging.Debug:
		level = slog.LevelDebug
	}
	l.log.Log(l.ctx, level, fmt.Sprintf(format, v...), "source", "aws-sdk")
}

// WithContext implements logging.ContextLogger: lines keep the operation's
// context (for handlers that read it).
func (l sdkLogger) WithContext(ctx context.Context) logging.Logger {
	return sdkLogger{log: l.log, ctx: ctx}
}
