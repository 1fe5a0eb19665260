from django.contrib import admin
from django.utils import timezone

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are made by their users (or manage.py api_token); staff see and revoke them."""

    list_display = ("prefix", "user", "name", "scope", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("scope", "revoked_at")
    search_fields = ("user__username", "name", "prefix")
    readonly_fields = ("user", "prefix", "digest", "scope", "created_at", "expires_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
