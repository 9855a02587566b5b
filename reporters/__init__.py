"""The protocols of the crash reporters studios already ship (Sentry SDKs, Crashpad/Breakpad,
Unreal's CrashReportClient), read into Blackbox's crash reports."""
