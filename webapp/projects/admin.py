from django.contrib import admin

from .models import AuditEvent, IdempotencyKey, Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """Staff set a project's disk budgets here (empty: the defaults from the runs folder's disk,
    webapp.runs.disk_budget)."""

    list_display = ("name", "personal_for", "created_by", "run_disk_budget_mb", "disk_budget_mb", "created_at")
    search_fields = ("name",)
    inlines = [MembershipInline]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The audit trail is a record: staff read it, nobody edits it."""

    list_display = ("at", "actor_name", "action", "target_type", "target_id", "project")
    list_filter = ("action", "target_type")
    search_fields = ("actor_name", "project__name")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("project", "user", "role", "created_at")
    list_filter = ("role",)
    search_fields = ("project__name", "user__username")


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(admin.ModelAdmin):
    """Launch keys and the answers they got (kept 24 h): read-only, for staff looking into a retried launch."""

    list_display = ("key", "user", "response_status", "created_at")
    search_fields = ("user__username", "key")
    readonly_fields = ("user", "key", "request_hash", "response_status", "response_body", "created_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
