"""Screenshots scaled so neither side passes 1366 px, and the model's coordinates mapped
back to the input space (pixels, or a Retina Mac's points)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from habakkuk.tools.computer.geometry import (
    Geometry,
    OutsideImage,
    Size,
    cropped,
    scaled_shot,
    shown_size,
)


def png(width: int, height: int) -> bytes:
    image = Image.new("RGB", (width, height), (10, 20, 30))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


@pytest.mark.parametrize(
    ("captured", "shown"),
    [
        (Size(1280, 800), Size(1280, 800)),  # fits: never scaled up
        (Size(1366, 768), Size(1366, 768)),  # exactly the limit
        (Size(1920, 1080), Size(1366, 768)),
        (Size(2560, 1600), Size(1366, 854)),  # a Retina MacBook's pixels
        (Size(1080, 1920), Size(768, 1366)),  # portrait: the height is the long side
        (Size(3840, 2160), Size(1366, 768)),
        (Size(20000, 10), Size(1366, 1)),  # a sliver keeps at least one pixel
    ],
)
def test_neither_side_of_the_shown_image_passes_1366_pixels(captured: Size, shown: Size) -> None:
    assert shown_size(captured) == shown
    assert max(shown.width, shown.height) <= 1366


def test_a_capture_is_decoded_scaled_with_its_aspect_and_encoded_as_png() -> None:
    shot = scaled_shot(png(1920, 1200))
    assert shot.geometry.captured == Size(1920, 1200)
    assert shot.geometry.shown == Size(1366, 854)
    assert shot.geometry.input == Size(1920, 1200)  # input is the pixels unless told
    with Image.open(io.BytesIO(shot.png)) as image:
        assert image.format == "PNG" and image.size == (1366, 854)


def test_a_retina_capture_maps_to_points_not_pixels() -> None:
    shot = scaled_shot(png(2880, 1800), input_size=Size(1440, 900))
    geometry = shot.geometry
    assert geometry.shown == Size(1366, 854) and geometry.input == Size(1440, 900)
    assert geometry.to_input(0, 0) == (0, 0)
    assert geometry.to_input(1365, 853) == (1439, 899)
    assert geometry.to_input(683, 427) == (720, 450)  # the middle stays the middle


def test_unscaled_coordinates_pass_through_unchanged() -> None:
    geometry = Geometry(Size(1280, 800), Size(1280, 800), Size(1280, 800))
    assert geometry.to_input(0, 0) == (0, 0)
    assert geometry.to_input(640, 400) == (640, 400)
    assert geometry.to_input(1279, 799) == (1279, 799)


def test_scaled_coordinates_land_inside_the_area_the_shown_pixel_covers() -> None:
    geometry = Geometry(Size(1366, 768), Size(1920, 1080), Size(1920, 1080))
    factor = 1920 / 1366
    for x in (0, 1, 100, 683, 1000, 1365):
        mapped, _ = geometry.to_input(x, 0)
        # the shown pixel x covers input pixels [x * factor, (x + 1) * factor)
        assert int(x * factor) <= mapped < (x + 1) * factor + 1
        assert 0 <= mapped <= 1919
    assert geometry.to_input(1365, 767) == (1919, 1079)


@pytest.mark.parametrize(("x", "y"), [(-1, 0), (0, -1), (1366, 0), (0, 768), (5000, 5000)])
def test_a_coordinate_outside_the_shown_image_is_an_error_naming_its_size(x: int, y: int) -> None:
    geometry = Geometry(Size(1366, 768), Size(1920, 1080), Size(1920, 1080))
    with pytest.raises(OutsideImage, match="1366x768"):
        geometry.to_input(x, y)


def test_the_pointer_maps_back_into_the_shown_image() -> None:
    geometry = Geometry(Size(1366, 768), Size(1920, 1080), Size(1920, 1080))
    assert geometry.to_shown(0, 0) == (0, 0)
    assert geometry.to_shown(1919, 1079) == (1365, 767)
    x, y = geometry.to_input(500, 300)
    assert geometry.to_shown(x, y) == (500, 300)  # a round trip lands on the same pixel


def test_zoom_crops_the_full_resolution_capture() -> None:
    capture = Image.new("RGB", (2732, 1536), (0, 0, 0))
    capture.paste((255, 0, 0), (1366, 768, 2732, 1536))  # the bottom-right quarter is red
    out = io.BytesIO()
    capture.save(out, "PNG")
    geometry = Geometry(Size(1366, 768), Size(2732, 1536), Size(2732, 1536))
    box = geometry.crop_box((683, 384, 783, 434))
    assert box == (1366, 768, 1566, 868)  # 100 x 50 shown pixels are 200 x 100 captured
    with Image.open(io.BytesIO(cropped(out.getvalue(), box))) as region:
        assert region.size == (200, 100)
        assert region.getpixel((0, 0)) == (255, 0, 0)
    with pytest.raises(OutsideImage):
        geometry.crop_box((1300, 700, 1400, 760))


def test_bytes_that_are_no_image_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a readable image"):
        scaled_shot(b"not a png")
