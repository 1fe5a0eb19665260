"""Names the app uses itself: the "default" project (where work without a user goes, only staff see it) is made by a
data migration, so a user's request never makes it and nobody becomes its admin by asking for the name first; it
cannot be created or renamed to (any case), through the API, the projects page or the admin. And making a
project or adding a member says no more about names the caller cannot see than it must."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.api.conftest import Api, _user_with_token
from tests.conftest import logged_in
from webapp.projects.models import Membership, Project
from webapp.projects.services import DEFAULT_PROJECT, default_project, project_for_launch

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

VARIANTS = ["default", "Default", "DEFAULT", " default "]


def test_the_default_project_is_there_from_the_start_with_nobody_in_it():
    project = Project.objects.get(name=DEFAULT_PROJECT)
    assert project.created_by is None and project.personal_for is None
    assert not Membership.objects.filter(project=project).exists()
    assert default_project() == project and project_for_launch(user=None, project=None) == project


@pytest.mark.parametrize("name", VARIANTS)
def test_the_api_refuses_the_default_name_and_gives_no_membership(client, name):
    user, token = _user_with_token(get_user_model(), "mallory")
    response = Api(client, token).post("/projects", {"name": name})
    assert response.status_code == 400, response.content
    assert "reserved" in response.json()["errors"]["name"]
    assert list(Membership.objects.filter(user=user).values_list("project__name", flat=True)) == ["mallory"]
    assert not Membership.objects.filter(project__name__iexact="default").exists()
    assert Project.objects.filter(name__iexact="default").count() == 1


@pytest.mark.parametrize("name", VARIANTS)
def test_the_projects_page_refuses_the_default_name(django_user_model, name):
    user = django_user_model.objects.create_user(username="mallory", password="x")
    response = logged_in(user).post(reverse("projects:list"), {"name": name})
    body = response.content.decode()
    assert response.status_code == 400 and 'data-field="name"' in body and "reserved" in body
    assert not Membership.objects.filter(project__name__iexact="default").exists()


def test_a_fresh_database_without_the_row_still_never_gives_the_name_to_a_user(django_user_model):
    """A test database emptied by a flush has no migration rows: the name stays reserved all the same."""
    Project.objects.filter(name=DEFAULT_PROJECT).delete()
    user = django_user_model.objects.create_user(username="default", password="x")
    assert Project.objects.get(personal_for=user).name != DEFAULT_PROJECT
    project = default_project()
    assert project.name == DEFAULT_PROJECT and not Membership.objects.filter(project=project).exists()


def test_the_admin_cannot_rename_a_project_to_default_or_the_default_project_away(admin_client):
    other = Project.objects.create(name="vision")
    page = admin_client.post(reverse("admin:projects_project_change", args=[other.pk]), {
        "name": "Default", "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"})
    assert page.status_code == 200 and "reserved" in page.content.decode()
    assert Project.objects.get(pk=other.pk).name == "vision"
    default = default_project()
    page = admin_client.post(reverse("admin:projects_project_change", args=[default.pk]), {
        "name": "elsewhere", "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"})
    assert page.status_code == 200 and Project.objects.get(pk=default.pk).name == DEFAULT_PROJECT


def test_a_taken_name_the_caller_cannot_see_is_refused_like_a_reserved_one(client, django_user_model):
    """The caller learns the name is not available, not whose it is or that a project by that name exists: the
    answer is the one a reserved name gets."""
    owner, _ = _user_with_token(django_user_model, "owner")
    Project.objects.create(name="secret-plans", created_by=owner)
    api = Api(client, _user_with_token(django_user_model, "eve")[1])
    taken = api.post("/projects", {"name": "secret-plans"}).json()["errors"]["name"]
    reserved = api.post("/projects", {"name": "default"}).json()["errors"]["name"]
    assert taken.replace("secret-plans", "NAME") == reserved.replace("default", "NAME")
    assert "exists" not in taken and "secret-plans" in taken


def test_a_taken_name_the_caller_can_see_is_said_so(client, django_user_model):
    alice, token = _user_with_token(django_user_model, "alice")
    api = Api(client, token)
    assert api.post("/projects", {"name": "vision"}).status_code == 201
    again = api.post("/projects", {"name": "vision"})
    assert again.status_code == 400 and "you have a project named 'vision' already" in again.json()["errors"]["name"]


def test_a_non_admin_learns_nothing_about_usernames_from_adding_members(client, django_user_model):
    """Only a project's admins look a username up; a member or a non-member gets the same answer whether the user
    exists or not (403 for a member, 404 for a non-member), before any lookup."""
    from webapp.projects.services import project_create

    alice, _ = _user_with_token(django_user_model, "alice")
    project = project_create(user=alice, name="vision")
    member, token = _user_with_token(django_user_model, "mia")
    Membership.objects.create(project=project, user=member, role="member")
    outsider = Api(client, _user_with_token(django_user_model, "eve")[1])
    inside = Api(client, token)
    for api, status in ((inside, 403), (outsider, 404)):
        answers = {api.post("/projects/vision/members", {"username": username, "role": "viewer"}).content
                   for username in ("alice", "nobody-by-this-name")}
        assert len(answers) == 1 and api.post("/projects/vision/members", {
            "username": "alice", "role": "viewer"}).status_code == status
        pages = {logged_in(get_user_model().objects.get(username="mia" if status == 403 else "eve")).post(
            reverse("projects:detail", args=["vision"]), {"username": username, "role": "viewer"}).status_code
            for username in ("alice", "nobody-by-this-name")}
        assert len(pages) == 1


def test_an_admin_gets_the_same_answer_for_a_missing_and_an_inactive_user(client, django_user_model):
    from webapp.projects.services import project_create

    alice, token = _user_with_token(django_user_model, "alice")
    project_create(user=alice, name="vision")
    django_user_model.objects.create_user(username="gone", password="x", is_active=False)
    api = Api(client, token)
    missing = api.post("/projects/vision/members", {"username": "nobody", "role": "viewer"}).json()["errors"]
    inactive = api.post("/projects/vision/members", {"username": "gone", "role": "viewer"}).json()["errors"]
    assert missing["username"].replace("nobody", "X") == inactive["username"].replace("gone", "X")
