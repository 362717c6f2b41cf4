"""Which system checks operator commands run: the models and the settings invariants (tagged SETTINGS_TAG)."""

from __future__ import annotations

from django.core.checks import Tags

# Checks of settings that would lose data (the promotion TTL invariant) carry this tag so that operator
# commands, which skip the URL checks, still refuse to run on a broken configuration.
SETTINGS_TAG = "loopmem_settings"
OPERATOR_CHECK_TAGS = [Tags.models, SETTINGS_TAG]
