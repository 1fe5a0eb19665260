from django.contrib import admin

from .models import DatasetEntry


@admin.register(DatasetEntry)
class DatasetEntryAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "source", "rows", "size_bytes", "created_by", "created_at")
    list_filter = ("source",)
    search_fields = ("name", "project__name", "path")
    readonly_fields = ("path", "columns", "preview", "rows", "size_bytes")
